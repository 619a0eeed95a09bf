// Package lake is the server's store of record: one Apache Iceberg table
// per dataset (iceberg-go), each publish one Iceberg commit that carries
// both the open Parquet data files and the snapshot's serving artifacts.
// FORMAT.md ("The lake", in localcache/format) specifies the bytes.
//
// Map of the package:
//
//   - lake.go: Options (embedded default: a SQL catalog on SQLite at
//     <home>/lake/catalog.db, warehouse <home>/lake/warehouse, catalog
//     "energyscope", namespace "energyscope", table = dataset name; an
//     s3:// warehouse through iceberg-go's S3 IO), Open, the sentinel
//     errors. catalog_remote.go: PostgreSQL (pgx) and REST
//     catalogs.
//   - publish.go: Publish (snapshot directory -> one overwrite commit with
//     its Puffin statistics file in the same metadata swap), the
//     pin-parent / reload / rebuild / retry loop, and the cleanup of a
//     losing attempt's files.
//   - rows.go: the table schema and the snapshot directory read through
//     localcache/format's readers; parquet.go: the data file writer (row
//     groups at series boundaries, string columns as dictionary indices).
//   - serving.go: the Puffin layout (page-aligned artifact blobs, blob
//     types, summary keys) and its footer reader.
//   - vintage.go: Vintage, Vintages, Head, Current, Resolve (as-of).
//   - artifacts.go: Artifacts (where each blob lies, read from the Puffin
//     footer) and Extract (a verified snapshot directory).
//   - open.go: OpenSnapshot (a vintage mapped in place out of its Puffin
//     file, or out of a verified downloaded copy for a remote warehouse),
//     locating the blobs from the table metadata; the per-dataset cache
//     of the table loaded last.
//   - served.go: the served-vintage record a server keeps in its home
//     (WriteServed, ReadServed), mapped again without the catalog by
//     OpenServing (open.go).
//   - history.go: Rollback, Tag, Expire.
//   - syncfs.go: the fsyncing "file" IO scheme that replaces iceberg-go's
//     LocalFS (which never fsyncs).
//
// The package is for the server and the es command only: the desktop app
// and the companion must not link iceberg-go (see importgraph_test.go).
// It does not serve lookups: OpenSnapshot hands a server a
// localcache/snapshot.Snapshot mapped out of the lake.
package lake
