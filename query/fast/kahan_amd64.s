//go:build amd64 && !purego

#include "textflag.h"

// func kahanFoldAsm(has []bool, v []float64, seen []bool, val, c []float64, i int) int
//
// kahanFoldGo (kahan.go) four steps to a group, one step to a lane of a Y
// register; kahan_amd64.go says why. Registers:
//	R8  has      R9  v      R10 seen      R11 val      R12 c
//	CX  i        DX  len(has)             BX, SI  has and seen of the group
//	Y13 MaxFloat64 in each lane            Y14 the magnitude mask (all bits
//	Y15 zero                                   but the sign)
// In a group: Y0 has, Y1 has and seen (the lanes that add), Y2 the values
// x, Y3 the sums s, Y4 the compensations, Y10 s + x.
TEXT ·kahanFoldAsm(SB), NOSPLIT, $0-136
	MOVQ has_base+0(FP), R8
	MOVQ has_len+8(FP), DX
	MOVQ v_base+24(FP), R9
	MOVQ seen_base+48(FP), R10
	MOVQ val_base+72(FP), R11
	MOVQ c_base+96(FP), R12
	MOVQ i+120(FP), CX
	MOVQ $0x7fffffffffffffff, AX
	MOVQ AX, X14
	VPBROADCASTQ X14, Y14
	MOVQ $0x7fefffffffffffff, AX
	MOVQ AX, X13
	VPBROADCASTQ X13, Y13
	VPXOR Y15, Y15, Y15

loop:
	LEAQ 4(CX), AX
	CMPQ AX, DX
	JGT  done
	MOVL (R8)(CX*1), BX
	TESTL BX, BX
	JZ   next // no value in the group
	MOVL (R10)(CX*1), SI

	// The lanes' masks from the bools (0 or 1).
	VPMOVZXBQ (R8)(CX*1), Y0
	VPCMPGTQ  Y15, Y0, Y0
	VPMOVZXBQ (R10)(CX*1), Y1
	VPCMPGTQ  Y15, Y1, Y1
	VPAND     Y0, Y1, Y1

	VMOVUPD (R9)(CX*8), Y2
	VMOVUPD (R11)(CX*8), Y3
	VMOVUPD (R12)(CX*8), Y4

	// Where a lane adds, x, s and the compensation must be finite
	// (|f| <= MaxFloat64, false for a NaN); else the Go loop takes the group.
	VANDPD  Y14, Y2, Y5       // |x|
	VANDPD  Y14, Y3, Y6       // |s|
	VANDPD  Y14, Y4, Y7       // |c|
	VCMPPD  $2, Y13, Y5, Y8   // |x| <= max
	VCMPPD  $2, Y13, Y6, Y9
	VANDPD  Y9, Y8, Y8
	VCMPPD  $2, Y13, Y7, Y9
	VANDPD  Y9, Y8, Y8
	VANDNPD Y1, Y8, Y9        // adds and not finite
	VPTEST  Y9, Y9
	JNZ     done

	// t = s + x; the compensation adds (s - t) + x where |s| >= |x|,
	// else (x - t) + s, and is 0 where t overflowed.
	VADDPD    Y2, Y3, Y10       // t
	VANDPD    Y14, Y10, Y11
	VCMPPD    $0x1e, Y13, Y11, Y11 // |t| > max
	VCMPPD    $0x1d, Y5, Y6, Y12   // |s| >= |x|
	VBLENDVPD Y12, Y3, Y2, Y7      // s, else x
	VBLENDVPD Y12, Y2, Y3, Y8      // x, else s
	VSUBPD    Y10, Y7, Y7
	VADDPD    Y8, Y7, Y7
	VADDPD    Y7, Y4, Y9
	VANDNPD   Y9, Y11, Y9

	// Lanes that add: (t, compensation); with a value not yet seen:
	// (x, 0); without a value: as they were.
	VBLENDVPD Y0, Y2, Y3, Y5
	VBLENDVPD Y1, Y10, Y5, Y5
	VANDNPD   Y4, Y0, Y6
	VBLENDVPD Y1, Y9, Y6, Y6
	VMOVUPD   Y5, (R11)(CX*8)
	VMOVUPD   Y6, (R12)(CX*8)
	ORL       BX, SI
	MOVL      SI, (R10)(CX*1)

next:
	ADDQ $4, CX
	JMP  loop

done:
	VZEROUPPER
	MOVQ CX, ret+128(FP)
	RET
