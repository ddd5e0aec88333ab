//go:build amd64 && !purego

#include "textflag.h"

// decodeXORAsm is decodeXOR (xor.go) for amd64; xor_amd64.go says why.
//
// Registers, for the whole loop:
//	DI  the next point of dst          R8   the end of dst
//	SI  body                           R10  len(body)-8, the last 8-byte load
//	BX  the bit position               R11  t
//	R12 the time delta                 R13  the value's bits
//	DX  the meaningful bits of a value R14  the trailing zeros of a value
//	AX, CX, R9, R15: scratch (CX holds every variable shift count)
//
// A value's field is decoded from AX holding the 64 bits from its position
// on with at least 56 of them the stream's: the common sample (a delta of
// deltas of 0) loads the word once, at its first bit; after a longer delta
// of deltas, and for the first sample, the word is loaded one bit early and
// shifted, which leaves 56 as well. Where a value's header and bits do not
// fit in those 56, they are read with two loads of 32 bits, as decodeXOR
// does past 57.

// LOADB sets T to the 64 bits of body from bit P on (zeros past its end),
// as load does, without a branch: the 8 bytes are read at min(P/8, R10)
// and shifted by what lies between, 64 or more giving 0. P may be M (it is
// read before M is written); OUT, T, M and CX are clobbered.
#define LOADB(P, OUT, T, M) \
	MOVQ P, OUT; \
	SHRQ $3, OUT; \
	MOVQ OUT, T; \
	CMPQ T, R10; \
	CMOVQGT R10, T; \
	SUBQ T, OUT; \
	MOVQ (SI)(T*1), T; \
	BSWAPQ T; \
	SHLQ $3, OUT; \
	MOVQ P, CX; \
	ANDQ $7, CX; \
	ADDQ OUT, CX; \
	SHLQ CX, T; \
	CMPQ CX, $64; \
	SBBQ M, M; \
	ANDQ M, T

// func decodeXORAsm(dst []fpoint, body []byte, pos uint, t, tDelta int64, vbits uint64, lo, hi int64) (end uint, odd, gaveUp bool)
TEXT ·decodeXORAsm(SB), NOSPLIT, $16-106
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), R8
	SHLQ $4, R8
	ADDQ DI, R8
	MOVQ body_base+24(FP), SI
	MOVQ body_len+32(FP), R10
	SUBQ $8, R10
	MOVQ pos+48(FP), BX
	MOVQ t+56(FP), R11
	MOVQ tDelta+64(FP), R12
	MOVQ vbits+72(FP), R13
	MOVQ $64, DX
	XORQ R14, R14
	MOVQ hi+88(FP), AX
	SUBQ lo+80(FP), AX
	MOVQ AX, span-8(SP)
	MOVB $0, odd+104(FP)
	MOVB $0, gaveUp+105(FP)
	CMPQ DI, R8
	JCC done
	// The first sample's value follows its time delta, a uvarint the
	// caller read: no delta of deltas.
	JMP field

loop:
	// AX = load(body, BX): 8 bytes at BX/8 where they lie in body.
	MOVQ BX, AX
	SHRQ $3, AX
	CMPQ AX, R10
	JGT tail
	MOVQ (SI)(AX*1), AX
	BSWAPQ AX
	MOVQ BX, CX
	ANDQ $7, CX
	SHLQ CX, AX

loaded:
	// The delta of deltas: a 0 bit, or a longer one (dod).
	BTQ $63, AX
	JCS dod
	SHLQ $1, AX
	INCQ BX

value:
	// AX: the value's field at its top, 56 bits of it the stream's;
	// BX: its position.
	ADDQ R12, R11
	BTQ $63, AX
	JCC unchanged
	BTQ $62, AX
	JCS window
	// 10: the meaningful bits within the last leading/trailing zeros.
	LEAQ 2(DX), R9
	CMPQ R9, $56
	JHI wide2
	SHLQ $2, AX
	MOVQ $64, CX
	SUBQ DX, CX
	SHRQ CX, AX
	ADDQ R9, BX

xorv:
	MOVQ R14, CX
	SHLQ CX, AX
	XORQ AX, R13

store:
	MOVQ R11, 0(DI)
	MOVQ R13, 8(DI)
	ADDQ $16, DI
	// odd: t outside (lo, hi] (unsigned t-lo-1 >= hi-lo), or a stale
	// marker.
	MOVQ R11, AX
	SUBQ lo+80(FP), AX
	DECQ AX
	CMPQ AX, span-8(SP)
	JCC setodd
	MOVQ $0x7ff0000000000002, AX
	CMPQ R13, AX
	JEQ setodd

next:
	CMPQ DI, R8
	JCS loop

done:
	MOVQ BX, end+96(FP)
	RET

unchanged:
	// 0: the value is the one before.
	INCQ BX
	JMP store

setodd:
	MOVB $1, odd+104(FP)
	JMP next

tail:
	// Within the last 8 bytes, or past them.
	LOADB(BX, R9, AX, R15)
	JMP loaded

window:
	// 11: 5 bits of leading zeros, 6 of meaningful bits (0 meaning 64),
	// then the bits.
	MOVQ AX, R9
	SHLQ $2, R9
	SHRQ $59, R9
	MOVQ AX, R15
	SHLQ $7, R15
	SHRQ $58, R15
	DECQ R15
	ANDQ $63, R15
	INCQ R15
	LEAQ (R9)(R15*1), CX
	CMPQ CX, $64
	JHI giveup // corrupt: decodeXOR reports it
	MOVQ R15, DX
	MOVQ $64, R14
	SUBQ CX, R14
	LEAQ 13(DX), R9
	CMPQ R9, $56
	JHI wide13
	SHLQ $13, AX
	MOVQ $64, CX
	SUBQ DX, CX
	SHRQ CX, AX
	ADDQ R9, BX
	JMP xorv

wide2:
	ADDQ $2, BX
	JMP wide

wide13:
	ADDQ $13, BX

wide:
	// The bits from BX on, read as two loads' top 32 bits each.
	LOADB(BX, R9, AX, R15)
	SHRQ $32, AX
	SHLQ $32, AX
	MOVQ AX, hi32-16(SP)
	LEAQ 32(BX), R15
	LOADB(R15, R9, AX, R15)
	SHRQ $32, AX
	ORQ hi32-16(SP), AX
	MOVQ $64, CX
	SUBQ DX, CX
	SHRQ CX, AX
	ADDQ DX, BX
	JMP xorv

dod:
	// 10 and 14 bits, 110 and 17, 1110 and 20, each signed: above
	// 2^(n-1) stands for a negative number; 1111 and 64 bits are left to
	// decodeXOR.
	MOVQ AX, R9
	SHRQ $62, R9
	CMPQ R9, $2
	JNE dod17
	MOVQ AX, R9
	SHLQ $2, R9
	SHRQ $50, R9
	LEAQ -16384(R9), R15
	CMPQ R9, $8192
	CMOVQHI R15, R9
	ADDQ $16, BX
	JMP dodadd

dod17:
	MOVQ AX, R9
	SHRQ $61, R9
	CMPQ R9, $6
	JNE dod20
	MOVQ AX, R9
	SHLQ $3, R9
	SHRQ $47, R9
	LEAQ -131072(R9), R15
	CMPQ R9, $65536
	CMOVQHI R15, R9
	ADDQ $20, BX
	JMP dodadd

dod20:
	MOVQ AX, R9
	SHRQ $60, R9
	CMPQ R9, $14
	JNE giveup
	MOVQ AX, R9
	SHLQ $4, R9
	SHRQ $44, R9
	LEAQ -1048576(R9), R15
	CMPQ R9, $524288
	CMOVQHI R15, R9
	ADDQ $24, BX

dodadd:
	ADDQ R9, R12

field:
	// The value's field at BX, loaded one bit early and shifted (after a
	// longer delta of deltas, and for the first sample).
	LEAQ -1(BX), R15
	LOADB(R15, R9, AX, R15)
	SHLQ $1, AX
	JMP value

giveup:
	MOVB $1, gaveUp+105(FP)
	MOVQ BX, end+96(FP)
	RET
