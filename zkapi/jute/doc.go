// Package jute encodes and decodes the ZooKeeper 3.8 client wire protocol:
// the records of zookeeper.jute, the opcodes, error codes, event types and
// other constants a client and server exchange, and the length-prefixed
// framing of the TCP stream.
//
// It is a codec and nothing more. Apart from [ReadFrame], which reads one
// frame from a buffered reader, it does no I/O; it knows nothing of sessions,
// watches, ACL checks or path rules. The server in the parent package decides
// what a record means.
//
// # Encoding
//
// Jute's binary archive is simple: int and long are big-endian int32/int64, a
// boolean is one byte (any non-zero byte reads as true, as Java's
// DataInput.readBoolean does), a buffer or ustring is an int32 length followed
// by that many bytes (-1 meaning null), and a vector is an int32 count (-1
// meaning null) followed by its elements. Records are their fields in order,
// with no tags and no padding.
//
// A [Decoder] reads from a []byte and remembers the first error; after it,
// every read returns a zero value, so a record's Decode method reads field
// after field and the caller checks [Decoder.Err] once. No input makes it
// panic, and lengths are checked against the bytes left before anything is
// allocated, so a decoded record never costs much more memory than the frame
// it came from. Buffers returned by the decoder alias the input; strings are
// copies. Trailing bytes after a record are not an error, because ZooKeeper
// ignores them too (and the connect handshake relies on an optional trailing
// byte).
//
// An [Encoder] appends to a []byte. Null buffers (nil) are written as -1, as
// ZooKeeper does for a znode created with null data. Vectors are never written
// as null: nil and empty both encode as count 0, because Java clients iterate
// returned lists without checking for null.
//
// # Framing
//
// Every message in either direction is a 4-byte big-endian length followed by
// that many bytes. Requests are a [RequestHeader] followed by the opcode's
// request record; replies are a [ReplyHeader] followed, when the error code is
// [CodeOk], by the opcode's response record (on error ZooKeeper sends the
// header alone). The first message on a connection is different: a
// [ConnectRequest] with no header, answered by a [ConnectResponse] with no
// header. Watch notifications are a ReplyHeader with xid [XidNotification]
// followed by a [WatcherEvent].
//
// ZooKeeper bounds an incoming frame by the jute.maxbuffer system property,
// default 0xfffff (1 MiB - 1): in NIOServerCnxn.readLength a frame length below
// zero or above jute.maxbuffer closes the connection. Inside a frame,
// BinaryInputArchive allows a single buffer or string up to jute.maxbuffer plus
// zookeeper.jute.maxbuffer.extrasize (by default the same value again), which
// the frame bound already implies. [DefaultMaxBuffer] is that default, and
// [ReadFrame] returns a [*FrameLengthError] for a length outside [0, max] so the
// server can log it and close that one connection. A frame whose body fails
// to decode is different: ZooKeeper answers it with MarshallingError and keeps
// the connection (FinalRequestProcessor), except for the connect request, whose
// failure closes the connection.
//
// Before a connection's handshake, ZooKeeper also reads the first four bytes
// as a possible four-letter word ("ruok", "stat", ...); a server can Peek(4) on
// its bufio.Reader before calling ReadFrame to do the same.
//
// # Strings
//
// Java decodes a ustring as UTF-8, turning every malformed sequence into
// U+FFFD. This package returns the raw bytes instead, so a caller that
// validates paths must treat invalid UTF-8 the way ZooKeeper treats U+FFFD
// (PathUtils rejects it, since it is at or above U+FFF0).
package jute
