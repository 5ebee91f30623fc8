package chatbridge

// rope holds a text that grows by pieces (a call's arguments, an item's
// text) in blocks: growing to n bytes allocates about n, where a slice
// doubled as it grows reaches up to 2n and leaves the smaller copies to
// the collector. Blocks start small, so a short text costs little, and
// double up to ropeBlock. The text is read only by copying it out whole,
// into the event that carries it.
type rope struct {
	blocks [][]byte
	n      int // bytes held
}

const (
	ropeFirst = 256
	ropeBlock = 64 << 10
)

func (r *rope) add(b []byte) {
	r.n += len(b)
	for len(b) > 0 {
		if k := len(r.blocks); k > 0 {
			last := r.blocks[k-1]
			if room := cap(last) - len(last); room > 0 {
				m := min(room, len(b))
				r.blocks[k-1] = append(last, b[:m]...)
				b = b[m:]
				continue
			}
		}
		size := ropeFirst
		if k := len(r.blocks); k > 0 {
			size = min(2*cap(r.blocks[k-1]), ropeBlock)
		}
		r.blocks = append(r.blocks, make([]byte, 0, size))
	}
}

// appendTo appends the text to dst.
func (r *rope) appendTo(dst []byte) []byte {
	for _, b := range r.blocks {
		dst = append(dst, b...)
	}
	return dst
}
