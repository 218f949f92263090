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
// # The value log
//
// Values of valueThreshold bytes or more go to Badger's value log (.vlog
// files); the memtable log then holds a pointer (file, offset, length).
// Badger v4.9's writeRequests (db.go) copies a write's values into the
// value log file's memory map before it copies any of the write's records
// into the memtable log, from its one write goroutine, so in both files
// every write lies after the writes before it. A value log record ends in
// a CRC of its header, key and value. On open (value.go, valueLog.open)
// Badger reads only the newest value log file, truncates it at its first
// record that is torn, zero or fails its CRC, and starts a new file; older
// files are taken as they are.
// Nothing checks that a pointer the memtable log or a table holds still
// leads to a value: that is what the argument below is for.
//
// A crash of the process keeps every byte copied, so a pointer that
// survived in the memtable log points to a value that survived: the value
// was copied first. Cutting the value log shorter than that is not a
// crash of the process but of the machine.
//
// A crash of the machine can lose any unflushed page of either file,
// keeping a pointer and losing its value, or keeping a table (Badger
// fsyncs tables) whose pointers lead past the value log's end. Sync
// fsyncs every memtable and value log file before it records the durable
// index, so every record at a version at or below it, pointer and value,
// is on disk; truncation on open cuts only past them, since a file is
// written front to back. Pointers that lead nowhere lie at versions above
// the durable index, where the store goes back to on a new boot: no read
// looks there, and replay (or SkipTo) writes every such version again,
// with its value, before the applied index passes it. A later record of
// the same key and version shadows the earlier one in Badger's reads and
// compactions, so the dangling pointer is never followed. A value log file
// lost whole, and a new file of the same number, fall under the same
// argument: only versions above the durable index point into them.
//
// Value log GC (ReclaimValueLog) writes a file's live values again, at
// their own versions, into the current value log and memtable log, then
// deletes the file without fsyncing anything. A crash of the process in
// between leaves the old file or the moved records, both whole. For a crash
// of the machine the store keeps the deletion from happening before the
// moved records are fsynced (see ReclaimValueLog). Badger deletes a file by
// truncating it to nothing and then unlinking it, and creates one by
// creating it and then sizing it; a crash between leaves a file of length
// zero that Badger refuses to open, which holds no record, so Open removes
// it first (removeEmptyLogs).
//
// GC also races reads: Badger reads a value only when asked, and a lookup
// (unlike an iterator) does not hold GC's deletions off, so a value whose
// file GC deleted after the lookup reads back empty (Badger logs it and
// returns no error). The store looks such a key up again, which finds the
// copy GC wrote first (reader.value).
//
// Badger never rewrites the value log file it appends to, so Reclaim first
// makes it start a new one by writing fill records (see rotateValueLog).
// They are written at the applied record's version and are not state
// (snapshots and hashes leave them out); a crash before Reclaim drops them
// leaves them to the next Reclaim, which drops any it finds.
//
// store/vlogcrash_test.go cuts and zero-fills both files at every record
// boundary of the last groups and inside records, loses unflushed tails
// and holes of both to a simulated power loss, loses a GC's unsynced work,
// and kills a child process running GC beside Apply with SIGKILL.
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
// back in a cache bounded by Config.CacheSize (default 64 MiB), so that
// rewriting a hot key does not cost a Badger read; new keys are not
// admitted, so a bulk load does not fill it, but the absent Dir of a
// stored node (a leaf's, which every setData of it reads) is. It only
// ever describes the state at the applied index; see recordCache.
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
