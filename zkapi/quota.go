package zkapi

import (
	"strconv"
	"strings"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// ZooKeeper quotas, as ZooKeeper 3.8 enforces them with
// zookeeper.enforceQuota=true (ZooKeeperServer.checkQuota): a subtree whose
// path P has a node /zookeeper/quota/P/zookeeper_limits (zkCli's setquota
// makes it) is limited in how many nodes it holds, P included, and in how
// many data bytes. A hard limit (countHardLimit, byteHardLimit) refuses a
// create or setData that would pass it with QuotaExceeded; a soft one
// (count, bytes) only logs. The innermost quota above a path is the one
// checked.
//
// ZooKeeper keeps the subtree's figures in zookeeper_stats as it applies
// writes; Janus counts the subtree when it checks, on the member that
// takes the request, so writes racing through other members can pass a
// limit together (as writes racing through ZooKeeper's leader cannot).

const (
	quotaRoot     = "/zookeeper/quota"
	quotaLimitsNd = "zookeeper_limits"
)

// quotaLimits are the fields of a zookeeper_limits node (StatsTrack); -1
// means no limit.
type quotaLimits struct {
	count, bytes, countHard, byteHard int64
}

// parseLimits reads StatsTrack's "count=-1,bytes=-1,countHardLimit=5,..."
// form; fields it lacks are -1, as StatsTrack's getters answer.
func parseLimits(data []byte) quotaLimits {
	l := quotaLimits{-1, -1, -1, -1}
	for _, kv := range strings.Split(string(data), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "count":
			l.count = n
		case "bytes":
			l.bytes = n
		case "countHardLimit":
			l.countHard = n
		case "byteHardLimit":
			l.byteHard = n
		}
	}
	return l
}

// quotaPrefix returns the innermost path at or above path that has a
// quota, its limits, and whether there is one. ZooKeeper keeps no quota on
// / or /zookeeper.
func quotaPrefix(v core.View, path string) (string, quotaLimits, bool, error) {
	if path == "/" || path == "/zookeeper" || strings.HasPrefix(path, "/zookeeper/") {
		return "", quotaLimits{}, false, nil
	}
	for p := path; p != "/" && p != ""; p = parentPath(p) {
		n, err := v.Node([]byte(quotaRoot + p + "/" + quotaLimitsNd))
		if err != nil {
			return "", quotaLimits{}, false, err
		}
		if n != nil {
			return p, parseLimits(n.Value), true, nil
		}
	}
	return "", quotaLimits{}, false, nil
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// subtreeUsage counts the nodes of the subtree at path (path included, as
// ZooKeeper counts it) and their data bytes.
func subtreeUsage(v core.View, path string) (count, bytes int64, err error) {
	n, _, err := core.TreeNode(v, []byte(path))
	if err != nil || n == nil {
		return 0, 0, err
	}
	count, bytes = 1, int64(len(n.Value))
	var names []string
	if err := v.Children([]byte(path), func(name []byte) bool {
		names = append(names, string(name))
		return true
	}); err != nil {
		return 0, 0, err
	}
	prefix := path + "/"
	if path == "/" {
		prefix = "/"
	}
	for _, name := range names {
		c, b, err := subtreeUsage(v, prefix+name)
		if err != nil {
			return 0, 0, err
		}
		count, bytes = count+c, bytes+b
	}
	return count, bytes, nil
}

// checkQuota refuses a create or setData that would take the subtree of the
// innermost quota above its path past a hard limit, when quotas are
// enforced. A state it cannot read lets the write go on: the write itself
// then fails or succeeds on its own.
func (c *conn) checkQuota(top core.TxnOp) jute.Code {
	if !c.srv.cfg.EnforceQuota || (top.Kind != core.OpCreate && top.Kind != core.OpSetData) {
		return jute.CodeOk
	}
	v, err := c.srv.backend.Read(c.ctx, 0)
	if err != nil {
		return jute.CodeOk
	}
	defer v.Close()
	path := string(top.Key)
	prefix, lim, ok, err := quotaPrefix(v, path)
	if err != nil || !ok {
		return jute.CodeOk
	}
	countDiff, bytesDiff := int64(1), int64(len(top.Value))
	if top.Kind == core.OpSetData {
		countDiff = 0
		old, err := v.Node(top.Key)
		if err != nil || old == nil {
			return jute.CodeOk // setData of a missing node fails anyway
		}
		bytesDiff -= int64(len(old.Value))
	}
	checkCount := countDiff != 0 && (lim.count > -1 || lim.countHard > -1)
	checkBytes := bytesDiff != 0 && (lim.bytes > -1 || lim.byteHard > -1)
	if !checkCount && !checkBytes {
		return jute.CodeOk
	}
	count, bytes, err := subtreeUsage(v, prefix)
	if err != nil {
		return jute.CodeOk
	}
	over := func(what string, now, soft, hard int64) bool {
		limit, kind := soft, "soft"
		if hard > -1 {
			limit, kind = hard, "hard"
		}
		if now <= limit {
			return false
		}
		c.log.Warn("Quota exceeded", "path", prefix, what, now, kind+"Limit", limit)
		return hard > -1
	}
	if checkCount && over("count", count+countDiff, lim.count, lim.countHard) {
		return jute.CodeQuotaExceeded
	}
	if checkBytes && over("bytes", bytes+bytesDiff, lim.bytes, lim.byteHard) {
		return jute.CodeQuotaExceeded
	}
	return jute.CodeOk
}
