-- Queries for the sqlite3 real-program test (second sqlite3 process, on the database that
-- sqlite_build.sql made). Every result is ordered explicitly, so output depends on data only.
PRAGMA cache_size = -65536;
.headers on

-- Aggregates over an index and over the whole table.
SELECT grp, count(*) AS n, sum(qty) AS qty, printf('%.2f', avg(price)) AS avg_price,
       min(name) AS first_name, max(length(note)) AS longest_note
FROM item GROUP BY grp ORDER BY grp LIMIT 12;

SELECT substr(name, 1, instr(name, '-') - 1) AS kind, count(*), sum(qty), max(price)
FROM item GROUP BY kind ORDER BY kind;

-- Join, filtering on both indexes, and string aggregation (builds large strings in memory).
SELECT g.label, count(*) AS n, length(group_concat(i.name, ',')) AS concat_len
FROM item AS i JOIN grp_info AS g ON g.grp = i.grp
WHERE i.qty BETWEEN 100 AND 400
GROUP BY g.label ORDER BY n DESC, g.label LIMIT 10;

-- A sort that cannot use an index: exercises the sorter's in-memory runs.
SELECT id, name, price FROM item ORDER BY price * qty DESC, id LIMIT 8;
SELECT count(DISTINCT note), count(DISTINCT substr(name, 7, 3)) FROM item;

-- Window functions.
SELECT grp, name, qty, running FROM (
  SELECT grp, name, qty, sum(qty) OVER (PARTITION BY grp ORDER BY id) AS running,
         row_number() OVER (PARTITION BY grp ORDER BY qty DESC, id) AS rank
  FROM item)
WHERE rank <= 2 AND grp < 5 ORDER BY grp, rank;

-- Correlated subquery and JSON built from many rows.
SELECT grp, (SELECT count(*) FROM item AS j WHERE j.grp = g.grp AND j.qty > 10 * g.grp) AS above
FROM grp_info AS g ORDER BY grp LIMIT 6;
SELECT length(json_group_array(json_object('id', id, 'name', name))) FROM item WHERE qty < 50;

-- Writes: update, delete, reinsert, then vacuum rebuilds the whole file.
BEGIN;
UPDATE item SET note = upper(note) || '!' WHERE id % 7 = 0;
DELETE FROM item WHERE grp % 3 = 0;
INSERT INTO item (grp, name, qty, price, note)
  SELECT grp, name || '-copy', qty + 1, price, note FROM item WHERE id % 11 = 0;
COMMIT;
VACUUM;
SELECT count(*), sum(qty), sum(length(note)), max(id) FROM item;
PRAGMA integrity_check;
