package lake

import (
	"os"

	"github.com/apache/iceberg-go"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the "rest" catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Environment variables a REST catalog's credentials come from (never a
// flag: command lines are visible to every user of the machine).
const (
	// EnvCatalogCredential is an OAuth2 client credential
	// "CLIENT_ID:CLIENT_SECRET", exchanged at the catalog's
	// /v1/oauth/tokens for a bearer token (the Iceberg REST spec's
	// "credential" property; SeaweedFS takes an S3 access key and secret).
	EnvCatalogCredential = "ES_CATALOG_CREDENTIAL"
	// EnvCatalogToken is a bearer token sent as is (the "token" property).
	EnvCatalogToken = "ES_CATALOG_TOKEN"
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

// restProps: an Iceberg REST catalog. The warehouse is sent to the
// catalog's /v1/config (a catalog that serves several warehouses picks
// one by it: SeaweedFS maps s3://BUCKET/... to its table bucket BUCKET);
// credentials come from EnvCatalogCredential or EnvCatalogToken.
func restProps(uri, warehouse string) (iceberg.Properties, error) {
	p := iceberg.Properties{
		"type":      "rest",
		"uri":       uri,
		"warehouse": warehouse,
	}
	if c := os.Getenv(EnvCatalogCredential); c != "" {
		p["credential"] = c
	}
	if t := os.Getenv(EnvCatalogToken); t != "" {
		p["token"] = t
	}
	return p, nil
}
