#include "textflag.h"

// func Range(p, n uintptr)
// Every 64-byte line of [p, p+n).
TEXT ·Range(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	p+0(FP), AX
	MOVQ	n+8(FP), BX
	ADDQ	AX, BX
	ANDQ	$~63, AX
loop:
	CMPQ	AX, BX
	JAE	done
	PREFETCHT0	(AX)
	ADDQ	$64, AX
	JMP	loop
done:
	RET
