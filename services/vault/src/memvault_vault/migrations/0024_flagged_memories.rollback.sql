DROP INDEX memory_flagged;
