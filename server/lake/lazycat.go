package lake

import (
	"context"
	"iter"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// lazyCatalog is what Catalog returns: every call waits for the Lake's
// catalog connection (CatalogContext, bounded by the call's context) and
// goes to the real catalog; while the catalog cannot be reached each call
// fails with an error wrapping ErrCatalogUnreachable (it is never nil).
type lazyCatalog struct{ l *Lake }

var _ catalog.Catalog = lazyCatalog{}

func (c lazyCatalog) CatalogType() catalog.Type {
	c.l.cmu.Lock()
	cat := c.l.cat
	c.l.cmu.Unlock()
	if cat != nil {
		return cat.CatalogType()
	}
	return catalog.Type(c.l.props["type"])
}

func (c lazyCatalog) CreateTable(ctx context.Context, id table.Identifier, s *iceberg.Schema, opts ...catalog.CreateTableOpt) (*table.Table, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	return cat.CreateTable(ctx, id, s, opts...)
}

func (c lazyCatalog) CommitTable(ctx context.Context, id table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, "", err
	}
	return cat.CommitTable(ctx, id, reqs, ups)
}

func (c lazyCatalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return func(yield func(table.Identifier, error) bool) { yield(nil, err) }
	}
	return cat.ListTables(ctx, ns)
}

func (c lazyCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	return cat.LoadTable(ctx, id)
}

func (c lazyCatalog) DropTable(ctx context.Context, id table.Identifier) error {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return err
	}
	return cat.DropTable(ctx, id)
}

func (c lazyCatalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	return cat.RenameTable(ctx, from, to)
}

func (c lazyCatalog) CheckTableExists(ctx context.Context, id table.Identifier) (bool, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return false, err
	}
	return cat.CheckTableExists(ctx, id)
}

func (c lazyCatalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	return cat.ListNamespaces(ctx, parent)
}

func (c lazyCatalog) CreateNamespace(ctx context.Context, ns table.Identifier, props iceberg.Properties) error {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return err
	}
	return cat.CreateNamespace(ctx, ns, props)
}

func (c lazyCatalog) DropNamespace(ctx context.Context, ns table.Identifier) error {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return err
	}
	return cat.DropNamespace(ctx, ns)
}

func (c lazyCatalog) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return false, err
	}
	return cat.CheckNamespaceExists(ctx, ns)
}

func (c lazyCatalog) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (iceberg.Properties, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return nil, err
	}
	return cat.LoadNamespaceProperties(ctx, ns)
}

func (c lazyCatalog) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates iceberg.Properties) (catalog.PropertiesUpdateSummary, error) {
	cat, err := c.l.CatalogContext(ctx)
	if err != nil {
		return catalog.PropertiesUpdateSummary{}, err
	}
	return cat.UpdateNamespaceProperties(ctx, ns, removals, updates)
}
