"""Who may do what: authentication, authorization and proof of broker identity.

Per-listener TLS and SASL settings (security.py), one connection's SASL login
(sasl_gate.py) against the SCRAM credentials (credentials.py), slowed after failures
(auth_failures.py); the ACL authorizer (authorizer.py) kept equal to ZooKeeper
(acl_sync.py) and its admin APIs (acl_apis.py); the table of what each API needs
(authorization.py and its rules, authorization_*rules.py; KIP-430's operation lists,
authorized_operations.py); the broker's identity key (identity_key.py), the serving
side of its proof (peer_identity.py) and the fence in front of the controller's
requests (controller_fence.py). See docs/architecture.md, "Authentication",
"Authorization" and "Who may command a broker".
"""
