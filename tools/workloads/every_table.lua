-- sysbench 1.0 load that writes every table of a sysbench schema in turn (issue 60):
-- thread T's event N updates one random row of table ((T + N * threads) % tables) + 1,
-- so the threads together write all `tables` tables once every `tables` events,
-- where sysbench's own oltp scripts pick tables at random (some untouched for long).
-- Run: sysbench tools/workloads/every_table.lua --tables=N --table-size=M ... run

sysbench.cmdline.options = {
   tables = {"Number of tables (sbtest1 .. sbtestN)", 1},
   table_size = {"Number of rows per table", 10000},
}

function thread_init()
   drv = sysbench.sql.driver()
   con = drv:connect()
   n = 0
end

function event()
   local t = (sysbench.tid + n * sysbench.opt.threads) % sysbench.opt.tables + 1
   n = n + 1
   con:query(string.format("UPDATE sbtest%d SET k=k+1 WHERE id=%d", t,
                           sysbench.rand.uniform(1, sysbench.opt.table_size)))
end

function thread_done()
   con:disconnect()
end
