DROP TABLE archive_search_snapshot;
