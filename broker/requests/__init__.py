"""The request path between a codec and the handlers.

The interface a listener asks of the code that answers its frames (request_handler.py),
the ``RequestDispatcher`` that picks a handler by API key and turns failures into error
responses (dispatcher.py), the per-API item caps it applies first (request_caps.py),
the counting and logging of the errors a broker answers (request_errors.py) and the
rate limit on log lines a peer can trigger (log_limiter.py). Handlers live with what they
handle, in the sibling packages; none of them is here.
"""
