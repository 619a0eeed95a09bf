package lake

import (
	"github.com/apache/iceberg-go"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the "rest" catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// postgresProps: several servers share one catalog in PostgreSQL; the
// SQL catalog's compare-and-swap on metadata_location serializes them.
func postgresProps(uri, warehouse string) (iceberg.Properties, error) {
	return iceberg.Properties{
		"type":                "sql",
		"uri":                 uri,
		sqlcat.DriverKey:      "pgx",
		sqlcat.DialectKey:     string(sqlcat.Postgres),
		"warehouse":           warehouse,
		"init_catalog_tables": "true",
	}, nil
}

// restProps: an Iceberg REST catalog (credentials, if any, come from the
// environment through iceberg-go's own REST properties in a later change).
func restProps(uri, warehouse string) (iceberg.Properties, error) {
	return iceberg.Properties{
		"type":      "rest",
		"uri":       uri,
		"warehouse": warehouse,
	}, nil
}
