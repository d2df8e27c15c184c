"""Index maintenance for a vault's owner: failed index jobs, their retry, the indexer's rebuild job."""
