-- Builds the database for the sqlite3 real-program test (first of two sqlite3 processes).
-- Rows come from a recursive CTE running a linear congruential generator, so both runs of the
-- test build the very same 100,000 rows; SQLite's random() is never used. The page cache is made
-- large so that it lives in malloc'ed memory of the allocator under test.
PRAGMA cache_size = -65536;
PRAGMA journal_mode = DELETE;

CREATE TABLE item (
  id INTEGER PRIMARY KEY,
  grp INTEGER NOT NULL,
  name TEXT NOT NULL,
  qty INTEGER NOT NULL,
  price REAL NOT NULL,
  note TEXT
);

BEGIN;
WITH RECURSIVE gen(i, s) AS (
  SELECT 1, 20240601
  UNION ALL
  SELECT i + 1, (s * 1103515245 + 12345) % 2147483648 FROM gen WHERE i < 100000
)
INSERT INTO item (id, grp, name, qty, price, note)
SELECT i,
       (s >> 8) % 97,
       printf('%s-%s-%d', CASE (s >> 4) % 4 WHEN 0 THEN 'alpha' WHEN 1 THEN 'beta'
                                            WHEN 2 THEN 'gamma' ELSE 'delta' END,
              char(97 + (s >> 10) % 26, 97 + (s >> 15) % 26, 97 + (s >> 20) % 26), i),
       (s >> 12) % 1000,
       ((s >> 3) % 100000) / 100.0,
       -- Notes of very different lengths (up to ~2 KB) make records of many sizes.
       CASE WHEN (s >> 6) % 5 = 0 THEN NULL
            ELSE substr(replace(hex(zeroblob(1 + (s >> 9) % 1000)), '00', 'n' || (i % 10)),
                        1, 1 + (s >> 9) % 2000) END
FROM gen;
COMMIT;

CREATE INDEX item_grp ON item (grp, qty);
CREATE INDEX item_name ON item (name);
CREATE TABLE grp_info AS
  SELECT grp, printf('group-%03d', grp) AS label, count(*) AS n FROM item GROUP BY grp;
CREATE UNIQUE INDEX grp_info_grp ON grp_info (grp);

SELECT 'rows', count(*), sum(qty), printf('%.2f', sum(price)), count(note), sum(length(note))
FROM item;
PRAGMA integrity_check;
