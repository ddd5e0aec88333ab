//go:build amd64 && !purego

package fast

// decodeXORAsm is decodeXOR written out in amd64 assembly (xor_amd64.s),
// except that it gives up (gaveUp) at a 64-bit delta of deltas or a corrupt
// value header, for decodeXOR to decode the chunk again. The Go loop keeps
// about twenty values live in the sixteen registers and spills several to
// the stack at every sample, and decoding a chunk is a chain of dependent
// steps, each waiting on the bit position the one before computed; the
// assembly keeps the whole state in registers. Its output is decodeXOR's,
// bit for bit (TestDecodeXORAsm, FuzzDecodeXORAsm); the purego build tag
// leaves it out.
//
//go:noescape
func decodeXORAsm(dst []fpoint, body []byte, pos uint, t, tDelta int64, vbits uint64, lo, hi int64) (end uint, odd, gaveUp bool)

// decodeXORFast is decodeXOR, through the assembly where it can; body
// must hold at least 8 bytes.
func decodeXORFast(dst []fpoint, body []byte, pos uint, t, tDelta int64, vbits uint64, lo, hi int64) (end uint, odd, bad bool) {
	end, odd, gaveUp := decodeXORAsm(dst, body, pos, t, tDelta, vbits, lo, hi)
	if gaveUp {
		return decodeXOR(dst, body, pos, t, tDelta, vbits, lo, hi)
	}
	return end, odd, false
}
