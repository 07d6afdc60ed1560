"""The composition root: the ``minibroker`` command (main.py), above every layer, so
each sub-command is imported with a plain import the import contracts see."""
