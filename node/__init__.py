"""One minibroker process: a broker and, in cluster mode, its controller candidate.

The broker (broker/) and the controller (controller/) never import each other; this
package, one layer above both, assembles them: the controller candidate runs on the
broker's ZooKeeper session and its APIs are served on the broker's listener.
"""
