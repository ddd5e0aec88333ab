//go:build !amd64 || purego

package fast

// kahanFold is kahanFoldGo where there is no assembly for it.
func kahanFold(has []bool, v []float64, seen []bool, val, c []float64) {
	kahanFoldGo(has, v, seen, val, c)
}
