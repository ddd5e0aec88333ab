//go:build !amd64 || purego

package fast

// decodeXORFast is decodeXOR where there is no assembly for it.
func decodeXORFast(dst []fpoint, body []byte, pos uint, t, tDelta int64, vbits uint64, lo, hi int64) (end uint, odd, bad bool) {
	return decodeXOR(dst, body, pos, t, tDelta, vbits, lo, hi)
}
