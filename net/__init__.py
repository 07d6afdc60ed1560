"""Framed request/response connections over TCP: the one client-side transport that
brokers (replica fetchers, the controller's channel) and clients all use."""
