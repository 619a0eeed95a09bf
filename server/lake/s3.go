package lake

import (
	"context"
	"errors"
	"fmt"
	"os"

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
