package lake

import (
	"context"
	"slices"

	"github.com/apache/iceberg-go/table"
)

// ReferencedFiles lists, sorted, every file the table's metadata
// references: the current metadata file and the metadata log, and for
// every retained snapshot its manifest list, its manifests, their data
// files (a DELETED entry only records a removal, but its path is listed
// too) and its statistics (Puffin) file. file:// locations are given as
// local paths. What a warehouse holds beyond this list is an orphan:
// the orphan checks of the lake's and the replicas' tests read it.
func ReferencedFiles(ctx context.Context, tbl *table.Table) ([]string, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	add := func(p string) { set[localPathOf(p)] = true }
	add(tbl.MetadataLocation())
	for e := range tbl.Metadata().PreviousFiles() {
		add(e.MetadataFile)
	}
	for _, s := range tbl.Metadata().Snapshots() {
		add(s.ManifestList)
		mans, err := s.Manifests(fs)
		if err != nil {
			return nil, err
		}
		for _, m := range mans {
			add(m.FilePath())
			for e, err := range m.Entries(fs, true) {
				if err != nil {
					return nil, err
				}
				add(e.DataFile().FilePath())
			}
		}
	}
	for sf := range tbl.Metadata().Statistics() {
		add(sf.StatisticsPath)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}
