DROP TABLE IF EXISTS index_state;
