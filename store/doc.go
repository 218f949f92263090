// Package store keeps Janus's versioned state in Badger: the records core.Apply
// writes, readable at the current revision and at any revision not yet
// compacted, with the event log that watches replay.
//
// # Timestamps
//
// Badger runs in managed mode and every record is written at the log index of
// the entry that wrote it (core.Batch.Index). A read at timestamp i sees the
// state after entry i. etcd revisions are not timestamps: the revision index
// maps each revision to the entry that created it, and because every change
// of a node makes a revision, reading at that entry's index shows exactly the
// nodes of the revision. The latest state is read at the applied index.
//
// # Key layout
//
//	n key                  node record (core.AppendNode); ordered by key, so an
//	                       etcd range is one ordered scan
//	d path                 Dir record of a tree path (core.AppendDir)
//	c parent 0x00 name     child index entry (empty value): listing children
//	                       scans only the parent's direct children
//	l id(8)                lease (core.AppendLease); ids are big-endian
//	k id(8) key            key attached to a lease (empty value)
//	m "core"               core.Meta, written once per applied group (see
//	                       Store.write)
//	m "applied"            applied index (8 bytes, big-endian), read at its
//	                       newest version
//	m "restored"           revision a snapshot was restored at
//	e rev(8)               the revision's events, keys only (see events.go);
//	                       the record starts with the index of the entry
//	                       that created rev, so it is the revision index too
//	r rev(8)               index of the entry that created rev, only for the
//	                       revision a snapshot was restored at (it has no
//	                       event record)
//
// # Write order and crashes
//
// Apply writes a group's batches, then the applied index, then lets readers
// see the new state. The applied index is a Badger write of its own, made
// once the group's write batch is flushed (and, for a group that compacts,
// its trimming): Badger keeps no order among one batch's records, but
// copies separate writes into its memtable log in order and replays a torn
// log up to its first damaged record only (see Store.write). Badger does
// not fsync as it writes (the consensus log is the durability); after a
// crash of the process the applied index Badger kept says where the log is
// replayed from, and after a crash of the machine the index Sync last made
// durable does (see durable.go). Writes of a group whose applied index was
// not kept lie above it, where no read looks, and replay rewrites them with
// the same bytes. This relies on the entries replayed being those applied
// before.
//
// # What is exact at which timestamp
//
// Node records, the child index, leases and the event log are written at
// the index of every entry that changes them, so a read at any timestamp
// sees them exactly. core.Meta and Dir records are written once per applied
// group, by the group's last entry that changed them: they are exact at
// every applied index, which is where the latest state and Apply read them,
// but can lag at a timestamp inside a group. A View of an older revision
// takes its Meta revision from itself (and compactions write Meta at their
// own index); Dir records are ZooKeeper's, and ZooKeeper reads only the
// latest state.
//
// # Apply's record cache
//
// Apply keeps the latest encodings of the node and Dir records it reads
// back in a cache bounded by Config.CacheSize (default 16 MiB), so that
// rewriting a hot key does not cost a Badger read; new keys are not
// admitted, so a bulk load does not fill it. It only ever describes the
// state at the applied index; see recordCache.
//
// # Compaction
//
// Compacting to revision C refuses reads below C, trims the revision index and
// event log below C, and sets Badger's discard timestamp to one below the
// index that created C, so that revision C-1, where the Prev of C's events is
// read, stays intact. Badger v4.9's levels.go (compactBuildTables/addKeys)
// was checked for what a discard timestamp means with NumVersionsToKeep = 1:
// versions above it are never counted nor dropped; at or below it, per key,
// the newest version is kept and all older ones skipped, and when that newest
// one is a delete the key is dropped altogether (its tombstone kept only while
// lower levels overlap). So every read at or above the discard timestamp is
// answered exactly, and reads below it are not, which is why the store
// refuses them itself and why an open View pins the discard timestamp it
// opened under until it is closed. Badger forgets the discard timestamp on
// restart; Open sets it again from the compact revision.
package store
