-- A sqlite3 workload for the heap checker: tables, indexes, joins, window functions, JSON,
-- a recursive CTE, updates, deletes and VACUUM. It must end without leak reports.
create table t(a integer primary key, b text, c real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 5000)
insert into t(b, c) select hex(randomblob(16)), i * 0.5 from n;
create index tb on t(b);
create table u(a integer references t(a), note text);
insert into u select a, 'note ' || a from t where a % 7 = 0;
select count(*), sum(c), max(length(b)) from t;
select t.a, u.note from t join u on t.a = u.a order by t.a limit 3;
select a, sum(c) over (order by a rows between 2 preceding and current row) from t limit 3;
select json_group_array(json_object('a', a, 'c', c)) from (select a, c from t limit 3);
update t set c = c * 2 where a % 3 = 0;
delete from t where a % 5 = 0;
select count(*) from t;
vacuum;
pragma integrity_check;
