package lake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/apache/iceberg-go"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	iceio "github.com/apache/iceberg-go/io"
)

// DefaultS3Region is the region an s3:// warehouse on an S3-compatible
// server (an endpoint given) signs with when no region is configured:
// such servers (SeaweedFS, MinIO without a region set, Ceph) accept it.
const DefaultS3Region = "us-east-1"

// ErrNoS3Region: an s3:// warehouse on AWS itself (no endpoint) and no
// region in Options.S3Region, AWS_REGION, AWS_DEFAULT_REGION or the
// shared AWS config.
var ErrNoS3Region = errors.New("lake: no AWS region for the s3:// warehouse: set AWS_REGION (or the profile's region)")

// s3Props adds an s3:// warehouse's endpoint and region to the catalog
// properties, from which iceberg-go builds the tables' IO. Without a
// region the AWS SDK refuses every request ("A region must be set"), at
// the first write, long after Open: the region is settled here instead.
func s3Props(ctx context.Context, o Options, warehouse string, props iceberg.Properties) error {
	if o.S3Endpoint != "" {
		props[iceio.S3EndpointURL] = o.S3Endpoint
	}
	region := o.S3Region
	if region == "" {
		// What iceberg-go's S3 IO would find: the environment and the
		// shared config files (no network).
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("lake: warehouse %s: AWS configuration: %w", warehouse, err)
		}
		region = cfg.Region
	}
	if region == "" {
		if o.S3Endpoint == "" && os.Getenv("AWS_S3_ENDPOINT") == "" {
			return fmt.Errorf("%w (warehouse %s)", ErrNoS3Region, warehouse)
		}
		region = DefaultS3Region
	}
	props[iceio.S3Region] = region
	return nil
}

// ErrWarehouseRefused: an s3:// warehouse refused the lake's own
// credentials (a wrong S3 secret or access key, an expired session
// token) or has no such bucket. Nothing was created in the catalog.
var ErrWarehouseRefused = errors.New("lake: the warehouse refused this server's S3 credentials")

// probePrefix starts the name of the object probeWarehouse asks for.
const probePrefix = ".es-probe-"

// refusedCodes are the S3 error codes of a request the server did not
// authenticate, or of a bucket that is not there. AccessDenied is not
// one: the server knew who asked (SeaweedFS's table buckets deny every
// path outside a table, even to an admin).
var refusedCodes = map[string]bool{
	"SignatureDoesNotMatch": true, "InvalidAccessKeyId": true, "InvalidToken": true, "ExpiredToken": true,
	"InvalidSecurity": true, "AuthorizationHeaderMalformed": true, "NoSuchBucket": true,
}

// probeWarehouse checks, before a table is created, that an s3://
// warehouse accepts the credentials the lake's own reads and writes use:
// it asks for an object that does not exist and looks at why it is not
// given. A REST catalog creates a table (and writes its metadata) with
// ITS credentials, so a server whose S3 secret is wrong would otherwise
// leave an empty table behind when its first data file is refused. A
// refusal (refusedCodes) is ErrWarehouseRefused, and the catalog stays as
// it was; any other answer (not found, access denied on that path, a
// network error the publish then meets itself) lets the create go on.
// Other warehouses need no probe: the catalog writes the first metadata
// file with the lake's own IO, and a refusal there creates nothing.
func (l *Lake) probeWarehouse(ctx context.Context) error {
	if !strings.HasPrefix(l.warehouse, "s3:") {
		return nil
	}
	fsys, err := iceio.LoadFS(ctx, l.props, l.warehouse)
	if err == nil {
		var b [8]byte
		rand.Read(b[:])
		var f iceio.File
		f, err = fsys.Open(strings.TrimSuffix(l.warehouse, "/") + "/" + Namespace + "/" + probePrefix + hex.EncodeToString(b[:]))
		if err == nil {
			f.Close()
		}
	}
	var coded interface{ ErrorCode() string }
	if err == nil || !errors.As(err, &coded) || !refusedCodes[coded.ErrorCode()] {
		return nil
	}
	return fmt.Errorf("%w (warehouse %s; check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and the bucket): %s",
		ErrWarehouseRefused, l.warehouse, coded.ErrorCode())
}
