DROP TABLE retention_run;
