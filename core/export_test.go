package core

// DirPaths lists every path that has a Dir record, for the invariant
// checks of package core_test.
func (m *MemState) DirPaths() [][]byte { return m.dirPaths() }
