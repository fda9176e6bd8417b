package bpf

// Matches says whether table is the one e describes (its size and each
// backend's count of slots), or what differs: a reader that takes the
// dump and the tables in two reads (lbctl dump) tells with it that the
// maps changed between them.
func (e MaglevEntry) Matches(table []uint32) error { return checkMaglevTable(e, table) }
