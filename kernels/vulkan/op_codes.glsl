// The op codes the element-wise kernels switch on, as plain #defines so that the host code
// includes this file too and static_asserts each against candle's enums (op_kinds.h):
// UnaryOp, BinaryOp and CmpOp values, then the extra unary codes affine, powf and elu.
#ifndef CANDLE_VK_OP_CODES
#define CANDLE_VK_OP_CODES

#define U_NEG 0
#define U_RECIP 1
#define U_EXP 2
#define U_LOG 3
#define U_SIN 4
#define U_COS 5
#define U_TANH 6
#define U_ABS 7
#define U_SQR 8
#define U_SQRT 9
#define U_GELU 10
#define U_GELU_ERF 11
#define U_ERF 12
#define U_RELU 13
#define U_SILU 14
#define U_CEIL 15
#define U_FLOOR 16
#define U_ROUND 17
#define U_SIGN 18
#define U_SIGMOID 19
#define U_AFFINE 20
#define U_POWF 21
#define U_ELU 22

#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_MAXIMUM 4
#define B_MINIMUM 5
#define B_POW 6

#define C_EQ 0
#define C_NE 1
#define C_LT 2
#define C_LE 3
#define C_GT 4
#define C_GE 5

#endif
