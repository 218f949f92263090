package core

// ZKTarget is the one rule for the node a ZooKeeper request names, in Apply
// and in the faces' reads alike: it finds what ZooKeeper sees at key in v
// (TreeNode) and checks that auth may do perm on it (ZKAllowed). A missing
// node is refused with CodeNoNode before any permission is looked at; a
// node auth may not act on, with CodeNoAuth. An error that is not a
// refusal (IsRefusal) is a failure to read v. It reads nothing but v and
// is deterministic.
func ZKTarget(v View, st *AuthState, key []byte, perm Perm, auth []ID) (*Node, *Dir, error) {
	n, d, err := TreeNode(v, key)
	if err != nil {
		return nil, nil, err
	}
	if n == nil {
		return nil, nil, errCode(CodeNoNode, key)
	}
	if !ZKAllowed(st, n.ACL, key, perm, auth) {
		return nil, nil, errCode(CodeNoAuth, key)
	}
	return n, d, nil
}

// ZKAllowed reports whether a ZooKeeper session with identities auth may do
// perm at key, whose node (or, for a create or delete, whose parent) has
// acl: the node's ACL must grant it (CheckACL) and, with etcd auth on, the
// etcd role permissions of st must not keep key from auth
// (AuthState.ZKPermitted). Apply, the faces' reads and watch delivery
// decide by it alike.
func ZKAllowed(st *AuthState, acl []ACL, key []byte, perm Perm, auth []ID) bool {
	return CheckACL(acl, perm, auth) && st.ZKPermitted(key, perm, auth)
}
