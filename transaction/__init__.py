"""The transaction coordinator (KIP-98): transactional ids, their producer ids and
epochs, and the two-phase commit that writes COMMIT or ABORT markers to every partition
of a transaction. A broker service like the group coordinator; docs/architecture.md,
"The transaction coordinator"."""
