//go:build !probe

package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// duckThreads is the DuckDB thread count: the machine's 2 cores.
const duckThreads = 2

func openDuck() (*sql.DB, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	// One connection: the prepared statements and the table live on it.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(fmt.Sprintf("SET threads = %d", duckThreads)); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// periodSQLType is the DuckDB type of the period column: DATE, or TIMESTAMP
// when the data has intraday series (mixed "2024-01-05" and
// "2024-01-05T13:00:00" cells).
func periodSQLType(intraday bool) string {
	if intraday {
		return "TIMESTAMP"
	}
	return "DATE"
}

// readCSVExpr reads the synth CSV with the period column typed explicitly
// rather than left to the sniffer.
func readCSVExpr(csv string, intraday bool) string {
	return fmt.Sprintf("read_csv(%s, header = true, types = {'period': '%s'})", sqlString(csv), periodSQLType(intraday))
}

// duckCook is DuckDB's equivalent of our cook: read the same CSV, sort by
// (series_id, period), write a Parquet file.
func duckCook(csv, out string, intraday bool) (time.Duration, error) {
	os.Remove(out)
	start := time.Now()
	db, err := openDuck()
	if err != nil {
		return 0, err
	}
	defer db.Close()
	q := fmt.Sprintf("COPY (SELECT * FROM %s ORDER BY series_id, period) TO %s (FORMAT parquet)", readCSVExpr(csv, intraday), sqlString(out))
	if _, err := db.Exec(q); err != nil {
		return 0, fmt.Errorf("duckdb cook: %w", err)
	}
	return time.Since(start), nil
}

// duckQueryStats are the per-call latencies of one prepared query.
type duckQueryStats struct {
	Lat  []time.Duration // sorted
	Rows int64
}

func runDuckQueries(ctx context.Context, stmt *sql.Stmt, qs []query) (duckQueryStats, error) {
	var st duckQueryStats
	var sum float64
	for _, q := range qs {
		t0 := time.Now()
		rows, err := stmt.QueryContext(ctx, q.ID, utc(q.From), utc(q.To))
		if err != nil {
			return st, err
		}
		var p time.Time
		var v float64
		for rows.Next() {
			if err := rows.Scan(&p, &v); err != nil {
				rows.Close()
				return st, err
			}
			sum += v
			st.Rows++
		}
		err = rows.Err()
		rows.Close()
		st.Lat = append(st.Lat, time.Since(t0))
		if err != nil {
			return st, err
		}
	}
	slices.Sort(st.Lat)
	_ = sum
	return st, nil
}

// duckQueries runs the same queries against a native DuckDB table loaded
// from the Parquet file (no index: DuckDB has none that would help here
// beyond zone maps) and directly against the Parquet file.
func duckQueries(parquet string, qs []query, nTable, nParquet int, intraday bool) (map[string]any, error) {
	ctx := context.Background()
	db, err := openDuck()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string]any{}
	t0 := time.Now()
	if _, err := db.Exec("CREATE TABLE t AS SELECT * FROM read_parquet(" + sqlString(parquet) + ")"); err != nil {
		return nil, err
	}
	out["duckdb_table_load_s"] = time.Since(t0).Seconds()
	out["duckdb_rss_after_load_mb"] = rssMB()

	// The bounds are bound as timestamps and cast to the column's type, so
	// that the comparison is on the column as stored.
	pt := periodSQLType(intraday)
	where := fmt.Sprintf(" WHERE series_id = ? AND period BETWEEN CAST(? AS %s) AND CAST(? AS %s) ORDER BY period", pt, pt)
	stmt, err := db.PrepareContext(ctx, "SELECT period, value FROM t"+where)
	if err != nil {
		return nil, err
	}
	tq := qs[:min(nTable, len(qs))]
	// One untimed call so that the first timed one is not the plan's warm-up.
	if _, err := runDuckQueries(ctx, stmt, tq[:1]); err != nil {
		return nil, err
	}
	st, err := runDuckQueries(ctx, stmt, tq)
	stmt.Close()
	if err != nil {
		return nil, fmt.Errorf("duckdb table query: %w", err)
	}
	out["duckdb_table_queries"] = len(st.Lat)
	out["duckdb_table_p50_us"] = us(pct(st.Lat, 50))
	out["duckdb_table_p99_us"] = us(pct(st.Lat, 99))
	out["duckdb_table_rows_per_query"] = float64(st.Rows) / float64(len(st.Lat))

	pstmt, err := db.PrepareContext(ctx, "SELECT period, value FROM read_parquet("+sqlString(parquet)+")"+where)
	if err != nil {
		return nil, err
	}
	defer pstmt.Close()
	pq := qs[:min(nParquet, len(qs))]
	if _, err := runDuckQueries(ctx, pstmt, pq[:1]); err != nil {
		return nil, err
	}
	ps, err := runDuckQueries(ctx, pstmt, pq)
	if err != nil {
		return nil, fmt.Errorf("duckdb parquet query: %w", err)
	}
	out["duckdb_parquet_queries"] = len(ps.Lat)
	out["duckdb_parquet_p50_us"] = us(pct(ps.Lat, 50))
	out["duckdb_parquet_p99_us"] = us(pct(ps.Lat, 99))
	out["duckdb_parquet_rows_per_query"] = float64(ps.Rows) / float64(len(ps.Lat))
	out["duckdb_peak_rss_mb"] = procStatus()["VmHWM"]
	return out, nil
}

// parquetFrom makes the query Parquet file from a DuckDB cook output.
func parquetFrom(cookOut, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(cookOut, dst)
}
