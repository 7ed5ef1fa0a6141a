// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title ScalarEval
/// @notice The scalar machine of compiler/reference/scalar.py on chain: one operation of the
/// numerics contract (docs/numerics.md) applied to the bits of its operands, bit for bit what
/// `scalar.evaluate(op, dtype, args, resultType)` computes. That Python file is the definition;
/// this library is tested against it case by case (tests/contracts/test_scalar_eval.py, and
/// millions of cases on anvil by tools/scalar_campaign.py).
///
/// Values are bits as scalar.py holds them: an s2/s4 is its sign-extended byte, a u2/u4 its
/// byte, a pred 0 or 1, a c64 the real part's bits in the low 32 and the imaginary part's
/// above (c128 likewise with 64). Floating-point arithmetic is exact integer arithmetic on
/// the unpacked values and one round-to-nearest-even into the format (one generic
/// unpack / round-and-pack core parametrized by exponent and fraction bits, shared by f32,
/// f64 and every conversion), subnormals honoured, every NaN produced canonical.
///
/// Status: DECIDED (0) with the result's bits; UNDECIDABLE (1) for ROUND_F32_CR within the
/// ambiguity band of a binary32 rounding boundary (where scalar.py raises Undecidable);
/// MALFORMED (2) for an op or a type the machine does not define it on (where scalar.py raises
/// ScalarError or another ValueError), for a conversion from a complex type to a real one
/// (docs/numerics.md §2 rejects it), for COMPLEX of parts other than f32 or f64, and for operand
/// bits out of range for their type. A result of a sub-byte integer type is held as the
/// reference evaluator holds it (sign- or zero-extended own bits, which scalar.py omits for
/// BITCAST, COPYSIGN and FLOOR_DIV on those types). Operands
/// an op does not read (b and c of a unary op) are ignored, and so is resultType except for
/// CONVERT and BITCAST.
library ScalarEval {
    // --- statuses ---------------------------------------------------------------------------
    uint8 internal constant DECIDED = 0;
    uint8 internal constant UNDECIDABLE = 1;
    uint8 internal constant MALFORMED = 2;

    // --- op codes: scalar.py's Op, by name and number ----------------------------------------
    uint8 internal constant ADD = 1;
    uint8 internal constant SUB = 2;
    uint8 internal constant MUL = 3;
    uint8 internal constant DIV = 4;
    uint8 internal constant REM = 5;
    uint8 internal constant MIN = 6;
    uint8 internal constant MAX = 7;
    uint8 internal constant NEG = 8;
    uint8 internal constant ABS = 9;
    uint8 internal constant SIGN = 10;
    uint8 internal constant FMA = 11;
    uint8 internal constant SQRT = 12;
    uint8 internal constant FLOOR = 13;
    uint8 internal constant CEIL = 14;
    uint8 internal constant RINT = 15;
    uint8 internal constant TRUNC = 16;
    uint8 internal constant COPYSIGN = 17;
    uint8 internal constant IS_NAN = 18;
    uint8 internal constant IS_INF = 19;
    uint8 internal constant IS_FINITE = 20;
    uint8 internal constant SIGNBIT = 21;
    uint8 internal constant TOTAL_KEY = 22;
    uint8 internal constant ROUND_F32_CR = 23;
    uint8 internal constant EQ = 30;
    uint8 internal constant NE = 31;
    uint8 internal constant LT = 32;
    uint8 internal constant LE = 33;
    uint8 internal constant GT = 34;
    uint8 internal constant GE = 35;
    uint8 internal constant SELECT = 36;
    uint8 internal constant AND = 40;
    uint8 internal constant OR = 41;
    uint8 internal constant XOR = 42;
    uint8 internal constant NOT = 43;
    uint8 internal constant SHL = 44;
    uint8 internal constant SHR_LOGICAL = 45;
    uint8 internal constant SHR_ARITH = 46;
    uint8 internal constant POPCNT = 47;
    uint8 internal constant CLZ = 48;
    uint8 internal constant POW = 49;
    uint8 internal constant FLOOR_DIV = 50;
    uint8 internal constant CONVERT = 60;
    uint8 internal constant BITCAST = 61;
    uint8 internal constant REAL = 62;
    uint8 internal constant IMAG = 63;
    uint8 internal constant COMPLEX = 64;

    // --- type codes: scalar.py's TYPE_CODES --------------------------------------------------
    uint8 internal constant PRED = 0;
    uint8 internal constant S2 = 1;
    uint8 internal constant S4 = 2;
    uint8 internal constant S8 = 3;
    uint8 internal constant S16 = 4;
    uint8 internal constant S32 = 5;
    uint8 internal constant S64 = 6;
    uint8 internal constant U2 = 7;
    uint8 internal constant U4 = 8;
    uint8 internal constant U8 = 9;
    uint8 internal constant U16 = 10;
    uint8 internal constant U32 = 11;
    uint8 internal constant U64 = 12;
    uint8 internal constant F8E5M2 = 13;
    uint8 internal constant F8E4M3 = 14;
    uint8 internal constant F8E3M4 = 15;
    uint8 internal constant F8E4M3FN = 16;
    uint8 internal constant F8E4M3FNUZ = 17;
    uint8 internal constant F8E5M2FNUZ = 18;
    uint8 internal constant F8E4M3B11FNUZ = 19;
    uint8 internal constant F16 = 20;
    uint8 internal constant BF16 = 21;
    uint8 internal constant F32 = 22;
    uint8 internal constant F64 = 23;
    uint8 internal constant C64 = 24;
    uint8 internal constant C128 = 25;

    // The width in bits of each type (dtype.bits), byte t for type t.
    uint256 private constant BITS_TABLE = 0x8040402010100808080808080840201008040240201008040208;

    // A float format, one word: fraction bits | exponent bits << 8 | bias << 16 | specials << 32
    // | canonical NaN << 40 | largest finite magnitude << 104 | what overflow gives (positive)
    // << 168. specials is IEEE (all-ones exponent: inf and NaN), FN (no inf; the NaN is
    // S.1111.111) or FNUZ (no inf, no -0; the one NaN is the -0 pattern).
    uint256 private constant IEEE = 0;
    uint256 private constant FN = 1;
    uint256 private constant FNUZ = 2;
    uint256 private constant FMT_F8E5M2 = 2 | (5 << 8) | (15 << 16) | (0x7E << 40) | (0x7B << 104) | (0x7C << 168);
    uint256 private constant FMT_F8E4M3 = 3 | (4 << 8) | (7 << 16) | (0x7C << 40) | (0x77 << 104) | (0x78 << 168);
    uint256 private constant FMT_F8E3M4 = 4 | (3 << 8) | (3 << 16) | (0x78 << 40) | (0x6F << 104) | (0x70 << 168);
    uint256 private constant FMT_F8E4M3FN =
        3 | (4 << 8) | (7 << 16) | (FN << 32) | (0x7F << 40) | (0x7E << 104) | (0x7F << 168);
    uint256 private constant FMT_F8E4M3FNUZ =
        3 | (4 << 8) | (8 << 16) | (FNUZ << 32) | (0x80 << 40) | (0x7F << 104) | (0x80 << 168);
    uint256 private constant FMT_F8E5M2FNUZ =
        2 | (5 << 8) | (16 << 16) | (FNUZ << 32) | (0x80 << 40) | (0x7F << 104) | (0x80 << 168);
    uint256 private constant FMT_F8E4M3B11FNUZ =
        3 | (4 << 8) | (11 << 16) | (FNUZ << 32) | (0x80 << 40) | (0x7F << 104) | (0x80 << 168);
    uint256 private constant FMT_F16 = 10 | (5 << 8) | (15 << 16) | (0x7E00 << 40) | (0x7BFF << 104) | (0x7C00 << 168);
    uint256 private constant FMT_BF16 = 7 | (8 << 8) | (127 << 16) | (0x7FC0 << 40) | (0x7F7F << 104) | (0x7F80 << 168);
    uint256 private constant FMT_F32 =
        23 | (8 << 8) | (127 << 16) | (0x7FC00000 << 40) | (0x7F7FFFFF << 104) | (0x7F800000 << 168);
    uint256 private constant FMT_F64 = 52 | (11 << 8) | (1023 << 16) | (0x7FF8000000000000 << 40)
        | (0x7FEFFFFFFFFFFFFF << 104) | (0x7FF0000000000000 << 168);
    uint256 private constant M64 = (1 << 64) - 1;

    // The number of operands of each op (scalar.py ARITY), two bits at 2 * op; 0: no such op.
    uint256 private constant ARITY_TABLE = 0x2550000296a6a03aaa000555955d5aaa8;

    // Classes of an unpacked float.
    uint256 private constant ZERO = 0;
    uint256 private constant FINITE = 1; // non-zero
    uint256 private constant INF = 2;
    uint256 private constant NAN = 3;

    /// An unpacked float: value = (-1)^neg * m * 2^e when cls is FINITE.
    struct Fp {
        uint256 cls;
        bool neg;
        uint256 m;
        int256 e;
    }

    // f64 constants of ROUND_F32_CR (compiler/numerics/mathlib/correctly_rounded.py ambiguous).
    uint256 private constant F64_HALF = 0x3FE0000000000000;
    uint256 private constant F64_TWO_POW_128 = 0x47F0000000000000;
    uint256 private constant F64_BAND = 0x3D70000000000000; // AMBIGUITY_BAND = 2**-40
    uint256 private constant F64_MINUS_MIN_SUBNORMAL_F32 = 0xB6A0000000000000; // -2**-149
    uint256 private constant F64_INF = 0x7FF0000000000000;
    uint256 private constant F32_INF = 0x7F800000;
    uint256 private constant F32_MAX = 0x7F7FFFFF;

    // ==========================================================================================
    // Entry point
    // ==========================================================================================

    /// @notice `op` applied to operands of type `dtype` (a, b, c as the op's arity reads them),
    /// the result of type `resultType` for CONVERT and BITCAST.
    function evaluate(uint8 op, uint8 dtype, uint8 resultType, uint256 a, uint256 b, uint256 c)
        internal
        pure
        returns (uint8 status, uint256 bits)
    {
        uint256 n = _arity(op);
        if (n == 0 || dtype > C128) return (MALFORMED, 0);
        if (op == SELECT) {
            if (a > 1 || !_valid(dtype, b) || !_valid(dtype, c)) return (MALFORMED, 0);
            return (DECIDED, a == 1 ? b : c);
        }
        if (!_valid(dtype, a) || (n > 1 && !_valid(dtype, b)) || (n > 2 && !_valid(dtype, c))) {
            return (MALFORMED, 0);
        }
        if (op >= CONVERT) return _typeOp(op, dtype, resultType, a, b);
        if (op == COPYSIGN) {
            uint256 sign = 1 << (_bits(dtype) - 1);
            return (DECIDED, _held(dtype, (a & ~sign) | (b & sign)));
        }
        if (op == TOTAL_KEY) return _totalKey(dtype, a);
        if (_isInt(dtype)) return op >= EQ && op <= GE ? _compare(op, dtype, a, b) : _integer(op, dtype, a, b);
        if (op >= EQ && op <= GE) return _compare(op, dtype, a, b);
        if (op >= IS_NAN && op <= SIGNBIT) return _classify(op, dtype, a);
        if (op == ROUND_F32_CR) {
            if (dtype != F64) return (MALFORMED, 0);
            return _roundF32Cr(a);
        }
        if (dtype == PRED) return _pred(op, a, b);
        if (dtype == F32 || dtype == F64) return _float(op, dtype == F32 ? FMT_F32 : FMT_F64, a, b, c);
        return (MALFORMED, 0);
    }

    /// How many operands `op` reads (scalar.py ARITY); 0 for a code that is no op.
    function _arity(uint8 op) private pure returns (uint256) {
        return op > COMPLEX ? 0 : (ARITY_TABLE >> (2 * uint256(op))) & 3;
    }

    // ==========================================================================================
    // Types
    // ==========================================================================================

    function _bits(uint8 t) private pure returns (uint256) {
        return (BITS_TABLE >> (uint256(t) * 8)) & 0xFF;
    }

    /// The bits one element occupies (dtype.storage_bits): a sub-byte integer holds a byte.
    function _storageBits(uint8 t) private pure returns (uint256) {
        uint256 w = _bits(t);
        return w < 8 ? 8 : w;
    }

    function _isSigned(uint8 t) private pure returns (bool) {
        return t >= S2 && t <= S64;
    }

    function _isInt(uint8 t) private pure returns (bool) {
        return t >= S2 && t <= U64;
    }

    function _isFloat(uint8 t) private pure returns (bool) {
        return t >= F8E5M2 && t <= F64;
    }

    function _isComplex(uint8 t) private pure returns (bool) {
        return t == C64 || t == C128;
    }

    /// Whether `x` is a value of type `t` as held: 0/1 for pred, a sign-extended byte for s2
    /// and s4, below 2^bits for every other type.
    function _valid(uint8 t, uint256 x) private pure returns (bool) {
        if (t == PRED) return x <= 1;
        uint256 w = _bits(t);
        if (t == S2 || t == S4) return x < (1 << (w - 1)) || (x >= 256 - (1 << (w - 1)) && x < 256);
        return x < (1 << w);
    }

    /// Bits of a type's storage held as the type holds its values (what the reference
    /// evaluator keeps of every result, compiler/reference/evaluator.py _held_exactly): a
    /// sub-byte integer's own bits, sign- or zero-extended; a pred 0 or 1; others unchanged.
    /// Only the bit-moving ops (BITCAST, COPYSIGN) can make a byte that needs it.
    function _held(uint8 t, uint256 x) private pure returns (uint256) {
        if (t == PRED) return x == 0 ? 0 : 1;
        if (_bits(t) < 8) return _iwrap(t, int256(x));
        return x;
    }

    function _fmt(uint8 t) private pure returns (uint256) {
        if (t == F32) return FMT_F32;
        if (t == F64) return FMT_F64;
        if (t == F16) return FMT_F16;
        if (t == BF16) return FMT_BF16;
        if (t == F8E5M2) return FMT_F8E5M2;
        if (t == F8E4M3) return FMT_F8E4M3;
        if (t == F8E3M4) return FMT_F8E3M4;
        if (t == F8E4M3FN) return FMT_F8E4M3FN;
        if (t == F8E4M3FNUZ) return FMT_F8E4M3FNUZ;
        if (t == F8E5M2FNUZ) return FMT_F8E5M2FNUZ;
        return FMT_F8E4M3B11FNUZ;
    }

    // ==========================================================================================
    // Bit operations: CONVERT, BITCAST, REAL, IMAG, COMPLEX, TOTAL_KEY, classification
    // ==========================================================================================

    function _typeOp(uint8 op, uint8 dtype, uint8 target, uint256 a, uint256 b) private pure returns (uint8, uint256) {
        if (op == COMPLEX) {
            // two f32 (f64) parts make a c64 (c128); scalar.py also joins other types' bits
            if (dtype != F32 && dtype != F64) return (MALFORMED, 0);
            return (DECIDED, a | (b << _bits(dtype)));
        }
        if (op == REAL || op == IMAG) {
            if (!_isComplex(dtype)) return (MALFORMED, 0);
            uint256 w = _bits(dtype) / 2;
            return (DECIDED, op == REAL ? a & ((1 << w) - 1) : a >> w);
        }
        if (target > C128) return (MALFORMED, 0);
        if (op == BITCAST) {
            if (_storageBits(target) != _storageBits(dtype)) return (MALFORMED, 0);
            return (DECIDED, _held(target, a));
        }
        return _convert(dtype, target, a);
    }

    /// IEEE totalOrder key on the type's bits (floats.total_order_key): a negative value's
    /// magnitude bits flipped. scalar.py defines it on every type of 8, 16, 32 or 64 bits.
    function _totalKey(uint8 t, uint256 a) private pure returns (uint8, uint256) {
        uint256 w = _bits(t);
        if (w != 8 && w != 16 && w != 32 && w != 64) return (MALFORMED, 0);
        uint256 sign = 1 << (w - 1);
        return (DECIDED, (a & sign) != 0 ? a ^ (sign - 1) : a);
    }

    function _classify(uint8 op, uint8 t, uint256 a) private pure returns (uint8, uint256) {
        if (t != F32 && t != F64) return (MALFORMED, 0);
        uint256 F = _fmt(t);
        if (op == SIGNBIT) return (DECIDED, (a & _signMask(F)) != 0 ? 1 : 0);
        uint256 cls = _unpack(F, a).cls;
        bool r = op == IS_NAN ? cls == NAN : (op == IS_INF ? cls == INF : cls < INF);
        return (DECIDED, r ? 1 : 0);
    }

    // ==========================================================================================
    // CONVERT (compiler/numerics/convert.py)
    // ==========================================================================================

    function _convert(uint8 s, uint8 t, uint256 x) private pure returns (uint8, uint256) {
        if (s == t) return (DECIDED, x); // the operand's bits, NaN payloads included
        if (_isComplex(s)) {
            if (!_isComplex(t)) return (MALFORMED, 0); // complex to real is rejected
            uint8 cs = s == C64 ? F32 : F64;
            uint8 ct = t == C64 ? F32 : F64;
            uint256 ws = _bits(cs);
            uint256 re = _convertReal(cs, ct, x & ((1 << ws) - 1));
            uint256 im = _convertReal(cs, ct, x >> ws);
            return (DECIDED, re | (im << _bits(ct)));
        }
        if (_isComplex(t)) {
            // A real or integer value to the part type, imaginary part +0; each part is made
            // canonical (an f32 NaN's payload too, for f32 to c64).
            uint8 ct = t == C64 ? F32 : F64;
            uint256 re = _convertReal(s, ct, x);
            uint256 F = _fmt(ct);
            if (_unpack(F, re).cls == NAN) re = _nan(F);
            return (DECIDED, re);
        }
        return (DECIDED, _convertReal(s, t, x));
    }

    /// Conversion between two real (non-complex) types.
    function _convertReal(uint8 s, uint8 t, uint256 x) private pure returns (uint256) {
        if (s == t) return x;
        Fp memory v;
        if (_isFloat(s)) {
            v = _unpack(_fmt(s), x);
        } else {
            int256 i = s == PRED ? int256(x) : _ival(s, x);
            v.neg = i < 0;
            v.m = uint256(i < 0 ? -i : i);
            v.cls = i == 0 ? ZERO : FINITE;
        }
        if (t == PRED) return v.cls == ZERO ? 0 : 1; // x != 0, so NaN gives true
        if (_isFloat(t)) return _packFp(_fmt(t), v);
        if (!_isFloat(s)) return _iwrap(t, v.neg ? -int256(v.m) : int256(v.m));
        return _floatToInt(t, v);
    }

    /// Truncation toward zero, saturated to the target's range; NaN gives 0.
    function _floatToInt(uint8 t, Fp memory v) private pure returns (uint256) {
        if (v.cls == NAN || v.cls == ZERO) return 0;
        uint256 w = _bits(t);
        bool signed = _isSigned(t);
        int256 hi = signed ? int256(1 << (w - 1)) : int256(1 << w); // first value out of range
        int256 lo = signed ? -int256(1 << (w - 1)) : int256(0);
        uint256 mag;
        if (v.cls == INF || v.e > 64) {
            mag = 1 << 66; // beyond every integer type
        } else if (v.e >= 0) {
            mag = v.m << uint256(v.e);
        } else if (v.e > -64) {
            mag = v.m >> uint256(-v.e);
        }
        if (mag > (1 << 66)) mag = 1 << 66;
        int256 i = v.neg ? -int256(mag) : int256(mag);
        if (i >= hi) i = hi - 1;
        if (i < lo) i = lo;
        return _iwrap(t, i);
    }

    // ==========================================================================================
    // The float core: unpack, exact operations, round-and-pack
    // ==========================================================================================

    function _unpack(uint256 F, uint256 x) private pure returns (Fp memory v) {
        uint256 fb = F & 0xFF;
        uint256 eb = (F >> 8) & 0xFF;
        uint256 specials = (F >> 32) & 3;
        uint256 sign = 1 << (eb + fb);
        uint256 mag = x & (sign - 1);
        uint256 ex = mag >> fb;
        v.neg = (x & sign) != 0;
        v.m = mag & ((1 << fb) - 1);
        if (specials == FNUZ) {
            if (x == sign) {
                v.cls = NAN;
                return v;
            }
        } else if (specials == FN) {
            if (mag == sign - 1) {
                v.cls = NAN;
                return v;
            }
        } else if (ex == (1 << eb) - 1) {
            v.cls = v.m == 0 ? INF : NAN;
            return v;
        }
        if (mag == 0) return v; // ZERO
        v.cls = FINITE;
        int256 bias = int256((F >> 16) & 0xFFFF);
        if (ex == 0) {
            v.e = 1 - bias - int256(fb);
        } else {
            v.m |= 1 << fb;
            v.e = int256(ex) - bias - int256(fb);
        }
    }

    /// The canonical NaN of the format.
    function _nan(uint256 F) private pure returns (uint256) {
        return (F >> 40) & M64;
    }

    function _signMask(uint256 F) private pure returns (uint256) {
        return 1 << (((F >> 8) & 0xFF) + (F & 0xFF));
    }

    function _zero(uint256 F, bool neg) private pure returns (uint256) {
        return neg && ((F >> 32) & 3) != FNUZ ? _signMask(F) : 0;
    }

    /// What a value beyond the largest finite one becomes: ±inf, or the canonical NaN in a
    /// format without infinity.
    function _overflow(uint256 F, bool neg) private pure returns (uint256) {
        uint256 bits = F >> 168;
        return neg && ((F >> 32) & 3) == IEEE ? bits | _signMask(F) : bits;
    }

    /// Packs an unpacked value of any class into the format: NaN canonical, inf by the
    /// format's rule, a finite value rounded once.
    function _packFp(uint256 F, Fp memory v) private pure returns (uint256) {
        if (v.cls == NAN) return _nan(F);
        if (v.cls == INF) return _overflow(F, v.neg);
        if (v.cls == ZERO) return _zero(F, v.neg);
        return _pack(F, v.neg, v.m, v.e, false);
    }

    /// Rounds (-1)^neg * (m + d) * 2^e to the format, nearest-even, where d is 0, or in (0, 1)
    /// when `sticky` (then m must have at least one bit below the format's last kept bit, which
    /// every caller guarantees with a margin). Subnormals are kept; overflow follows the
    /// format; a result that rounds to zero keeps the sign (but in the fnuz formats).
    function _pack(uint256 F, bool neg, uint256 m, int256 e, bool sticky) private pure returns (uint256) {
        if (m == 0) return _zero(F, neg);
        int256 fb = int256(F & 0xFF);
        int256 q = 1 - int256((F >> 16) & 0xFFFF) - fb; // exponent of the subnormal quantum
        int256 Q = e + int256(_bitlen(m)) - 1 - fb; // exponent of the result's last bit
        if (Q < q) Q = q;
        uint256 sig;
        if (Q <= e) {
            sig = m << uint256(e - Q); // exact
        } else if (Q - e < 256) {
            uint256 sh = uint256(Q - e);
            sig = m >> sh;
            uint256 rest = m & ((1 << sh) - 1);
            uint256 half = 1 << (sh - 1);
            if (rest > half || (rest == half && (sticky || (sig & 1) == 1))) sig += 1;
        } // else: m < 2^255 is below half of the quantum, so it rounds to zero
        if (sig == 0) return _zero(F, neg);
        // A carry out of the significand moves into the exponent field by itself.
        uint256 mag = (uint256(Q - q) << uint256(fb)) + sig;
        if (mag > ((F >> 104) & M64)) return _overflow(F, neg);
        return neg ? mag | _signMask(F) : mag;
    }

    /// Number of bits of x (0 for 0).
    function _bitlen(uint256 x) private pure returns (uint256 n) {
        if (x >> 128 != 0) {
            x >>= 128;
            n = 128;
        }
        if (x >> 64 != 0) {
            x >>= 64;
            n += 64;
        }
        if (x >> 32 != 0) {
            x >>= 32;
            n += 32;
        }
        if (x >> 16 != 0) {
            x >>= 16;
            n += 16;
        }
        if (x >> 8 != 0) {
            x >>= 8;
            n += 8;
        }
        if (x >> 4 != 0) {
            x >>= 4;
            n += 4;
        }
        if (x >> 2 != 0) {
            x >>= 2;
            n += 2;
        }
        if (x >> 1 != 0) {
            x >>= 1;
            n += 1;
        }
        if (x != 0) n += 1;
    }

    /// m * 2^e with m's top bit moved to bit 200 (m below 2^201).
    function _norm(uint256 m, int256 e) private pure returns (uint256, int256) {
        uint256 s = 201 - _bitlen(m);
        return (m << s, e - int256(s));
    }

    /// The exact sum of two non-zero values x and y, as (m + d) * 2^e with d in (0, 1) when
    /// sticky; m is 0 when the sum is exactly zero. With x the larger in magnitude, normalized
    /// to bit 200, y only loses bits when it is more than 94 binades below (its significand has
    /// at most 106 bits), and then the sum keeps 199 bits above the sticky one.
    function _sum(Fp memory x, Fp memory y) private pure returns (Fp memory r, bool sticky) {
        (uint256 mx, int256 ex) = _norm(x.m, x.e);
        (uint256 my, int256 ey) = _norm(y.m, y.e);
        r.neg = x.neg;
        if (ey > ex || (ey == ex && my > mx)) {
            (mx, my) = (my, mx);
            (ex, ey) = (ey, ex);
            r.neg = y.neg;
        }
        uint256 d = uint256(ex - ey);
        if (d >= 256) {
            sticky = true;
            my = 0;
        } else if (d > 0) {
            sticky = (my & ((1 << d) - 1)) != 0;
            my >>= d;
        }
        r.e = ex;
        r.cls = FINITE;
        if (x.neg == y.neg) {
            r.m = mx + my;
        } else {
            // mx - (my + d) = (mx - my - 1) + (1 - d)
            r.m = sticky ? mx - my - 1 : mx - my;
        }
    }

    function _isNan(uint256 F, uint256 x) private pure returns (bool) {
        return _unpack(F, x).cls == NAN;
    }

    // ==========================================================================================
    // f32 and f64 arithmetic
    // ==========================================================================================

    function _float(uint8 op, uint256 F, uint256 a, uint256 b, uint256 c) private pure returns (uint8, uint256) {
        if (op == ADD || op == SUB) return (DECIDED, _fadd(F, a, op == SUB ? b ^ _signMask(F) : b));
        if (op == MUL) return (DECIDED, _fmul(F, a, b));
        if (op == DIV) return (DECIDED, _fdiv(F, a, b));
        if (op == REM) return (DECIDED, _frem(F, a, b));
        if (op == FMA) return (DECIDED, _fma(F, a, b, c));
        if (op == SQRT) return (DECIDED, _fsqrt(F, a));
        if (op >= FLOOR && op <= TRUNC) return (DECIDED, _fround(F, op, a));
        if (op == MIN || op == MAX) return (DECIDED, _fminmax(F, op == MAX, a, b));
        if (op == NEG || op == ABS || op == SIGN) return (DECIDED, _fsignOp(F, op, a));
        return (MALFORMED, 0);
    }

    /// a + b (SUB flips b's sign bit before; a NaN stays a NaN).
    function _fadd(uint256 F, uint256 a, uint256 b) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        Fp memory y = _unpack(F, b);
        if (x.cls == NAN || y.cls == NAN) return _nan(F);
        if (x.cls == INF) return y.cls == INF && x.neg != y.neg ? _nan(F) : _overflow(F, x.neg);
        if (y.cls == INF) return _overflow(F, y.neg);
        if (x.cls == ZERO) return y.cls == ZERO ? _zero(F, x.neg && y.neg) : _packFp(F, y);
        if (y.cls == ZERO) return a;
        (Fp memory r, bool sticky) = _sum(x, y);
        if (r.m == 0) return 0; // an exact zero sum is +0
        return _pack(F, r.neg, r.m, r.e, sticky);
    }

    function _fmul(uint256 F, uint256 a, uint256 b) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        Fp memory y = _unpack(F, b);
        bool neg = x.neg != y.neg;
        if (x.cls == NAN || y.cls == NAN) return _nan(F);
        if (x.cls == INF || y.cls == INF) {
            return x.cls == ZERO || y.cls == ZERO ? _nan(F) : _overflow(F, neg);
        }
        if (x.cls == ZERO || y.cls == ZERO) return _zero(F, neg);
        return _pack(F, neg, x.m * y.m, x.e + y.e, false);
    }

    function _fdiv(uint256 F, uint256 a, uint256 b) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        Fp memory y = _unpack(F, b);
        bool neg = x.neg != y.neg;
        if (x.cls == NAN || y.cls == NAN || (x.cls == y.cls && (x.cls == INF || x.cls == ZERO))) return _nan(F);
        if (x.cls == INF || y.cls == ZERO) return _overflow(F, neg);
        if (x.cls == ZERO || y.cls == INF) return _zero(F, neg);
        // The quotient keeps at least 2 * (fraction bits) + 5 - (fraction bits + 1) bits more
        // than the format, so the remainder is a sticky bit well below the rounding point.
        uint256 k = 2 * (F & 0xFF) + 6;
        uint256 n = x.m << k;
        return _pack(F, neg, n / y.m, x.e - y.e - int256(k), n % y.m != 0);
    }

    /// IEEE fmod: the exact remainder of truncating division, with the dividend's sign.
    function _frem(uint256 F, uint256 a, uint256 b) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        Fp memory y = _unpack(F, b);
        if (x.cls == NAN || y.cls == NAN || x.cls == INF || y.cls == ZERO) return _nan(F);
        if (x.cls == ZERO || y.cls == INF) return a;
        uint256 r;
        int256 e;
        if (x.e >= y.e) {
            // (x.m * 2^(x.e - y.e)) mod y.m, a chunk of the shift at a time
            uint256 d = uint256(x.e - y.e);
            r = x.m % y.m;
            while (d > 0) {
                uint256 s = d > 192 ? 192 : d;
                r = (r << s) % y.m;
                d -= s;
            }
            e = y.e;
        } else {
            uint256 d = uint256(y.e - x.e);
            r = d >= 128 ? x.m : x.m % (y.m << d);
            e = x.e;
        }
        if (r == 0) return _zero(F, x.neg);
        return _pack(F, x.neg, r, e, false);
    }

    /// fma(a, b, c) = a * b + c rounded once.
    function _fma(uint256 F, uint256 a, uint256 b, uint256 c) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        Fp memory y = _unpack(F, b);
        Fp memory z = _unpack(F, c);
        if (x.cls == NAN || y.cls == NAN || z.cls == NAN) return _nan(F);
        Fp memory p;
        p.neg = x.neg != y.neg;
        if (x.cls == INF || y.cls == INF) {
            if (x.cls == ZERO || y.cls == ZERO) return _nan(F);
            return z.cls == INF && z.neg != p.neg ? _nan(F) : _overflow(F, p.neg);
        }
        if (z.cls == INF) return c;
        if (x.cls == ZERO || y.cls == ZERO) return z.cls == ZERO ? _zero(F, p.neg && z.neg) : c;
        p.cls = FINITE;
        p.m = x.m * y.m;
        p.e = x.e + y.e;
        if (z.cls == ZERO) return _pack(F, p.neg, p.m, p.e, false);
        (Fp memory r, bool sticky) = _sum(p, z);
        if (r.m == 0) return 0;
        return _pack(F, r.neg, r.m, r.e, sticky);
    }

    function _fsqrt(uint256 F, uint256 a) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        if (x.cls == NAN || (x.neg && x.cls != ZERO)) return _nan(F);
        if (x.cls != FINITE) return a; // ±0, +inf
        // sqrt(m * 2^k') with an even exponent and at least 2 * (fraction bits) + 7 bits, so the
        // root has fraction bits + 3 and more: the remainder is a sticky bit below rounding.
        uint256 k = 2 * (F & 0xFF) + 8;
        if ((x.e - int256(k)) % 2 != 0) k += 1;
        uint256 n = x.m << k;
        uint256 s = _isqrt(n);
        return _pack(F, false, s, (x.e - int256(k)) / 2, s * s != n);
    }

    /// floor(sqrt(n)) (Newton's iteration from a power of two above the root's half).
    function _isqrt(uint256 n) private pure returns (uint256 r) {
        if (n == 0) return 0;
        r = 1 << ((_bitlen(n) + 1) / 2); // >= sqrt(n)
        while (true) {
            uint256 next = (r + n / r) / 2;
            if (next >= r) return r;
            r = next;
        }
    }

    /// FLOOR, CEIL, RINT (ties to even) and TRUNC to an integral value.
    function _fround(uint256 F, uint8 op, uint256 a) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        if (x.cls == NAN) return _nan(F);
        if (x.cls != FINITE || x.e >= 0) return a; // ±0, ±inf, integral
        uint256 ip;
        uint256 frac = x.m; // the fraction, in units of 2^e
        uint256 half = 1 << 255; // above any fraction when the shift is past the significand
        if (x.e > -128) {
            uint256 sh = uint256(-x.e);
            ip = x.m >> sh;
            frac = x.m & ((1 << sh) - 1);
            half = 1 << (sh - 1);
        }
        bool up;
        if (op == FLOOR) up = x.neg;
        else if (op == CEIL) up = !x.neg;
        else if (op == RINT) up = frac > half || (frac == half && (ip & 1) == 1);
        if (op != RINT && frac == 0) up = false;
        if (up) ip += 1;
        if (ip == 0) return _zero(F, x.neg);
        return _pack(F, x.neg, ip, 0, false);
    }

    /// The contract's minimum and maximum: NaN if either is NaN, and -0 < +0.
    function _fminmax(uint256 F, bool isMax, uint256 a, uint256 b) private pure returns (uint256) {
        if (_isNan(F, a) || _isNan(F, b)) return _nan(F);
        int256 ka = _orderKey(F, a);
        int256 kb = _orderKey(F, b);
        if (ka == kb) {
            uint256 sign = _signMask(F);
            if (ka != 0) return a; // equal non-zero values have equal bits
            bool neg = isMax ? (a & b & sign) != 0 : ((a | b) & sign) != 0;
            return neg ? sign : 0;
        }
        return (ka > kb) == isMax ? a : b;
    }

    /// NEG and ABS on the sign bit, SIGN; a NaN gives the canonical NaN.
    function _fsignOp(uint256 F, uint8 op, uint256 a) private pure returns (uint256) {
        Fp memory x = _unpack(F, a);
        if (x.cls == NAN) return _nan(F);
        uint256 sign = _signMask(F);
        if (op == NEG) return a ^ sign;
        if (op == ABS) return a & (sign - 1);
        if (x.cls == ZERO) return a; // sign(±0) = ±0
        uint256 one = ((F >> 16) & 0xFFFF) << (F & 0xFF);
        return x.neg ? one | sign : one;
    }

    /// A key that orders non-NaN floats numerically, with -0 == +0.
    function _orderKey(uint256 F, uint256 x) private pure returns (int256) {
        uint256 sign = _signMask(F);
        int256 mag = int256(x & (sign - 1));
        return (x & sign) != 0 ? -mag : mag;
    }

    /// IEEE comparison: false for every unordered pair but NE.
    function _fcompare(uint8 op, uint256 F, uint256 a, uint256 b) private pure returns (bool) {
        if (_isNan(F, a) || _isNan(F, b)) return op == NE;
        return _order(op, _orderKey(F, a), _orderKey(F, b));
    }

    function _order(uint8 op, int256 x, int256 y) private pure returns (bool) {
        if (op == EQ) return x == y;
        if (op == NE) return x != y;
        if (op == LT) return x < y;
        if (op == LE) return x <= y;
        if (op == GT) return x > y;
        return x >= y;
    }

    function _compare(uint8 op, uint8 t, uint256 a, uint256 b) private pure returns (uint8, uint256) {
        bool r;
        if (_isComplex(t)) {
            if (op != EQ && op != NE) return (MALFORMED, 0);
            uint256 F = t == C64 ? FMT_F32 : FMT_F64;
            uint256 w = t == C64 ? 32 : 64;
            uint256 mask = (1 << w) - 1;
            r = _fcompare(EQ, F, a & mask, b & mask) && _fcompare(EQ, F, a >> w, b >> w);
            if (op == NE) r = !r;
        } else if (t == F32 || t == F64) {
            r = _fcompare(op, _fmt(t), a, b);
        } else if (_isFloat(t)) {
            return (MALFORMED, 0);
        } else {
            r = _order(op, t == PRED ? int256(a) : _ival(t, a), t == PRED ? int256(b) : _ival(t, b));
        }
        return (DECIDED, r ? 1 : 0);
    }

    // ==========================================================================================
    // ROUND_F32_CR: f64 -> f32, decided only outside the ambiguity band
    // ==========================================================================================

    /// Rounds the f64 `a` to f32 and reports it undecidable exactly where
    /// compiler.numerics.mathlib.correctly_rounded.ambiguous(v, r) holds, computing that
    /// function's binary64 operations in its order with this library's f64 arithmetic.
    function _roundF32Cr(uint256 a) private pure returns (uint8, uint256) {
        Fp memory v = _unpack(FMT_F64, a);
        uint256 r = _packFp(FMT_F32, v);
        if (v.cls == NAN || v.cls == INF) return (DECIDED, r); // never ambiguous
        uint256 F = FMT_F64;
        uint256 absV = a & ((1 << 63) - 1);
        uint256 b = r & 0x7FFFFFFF;
        uint256 ra = b == F32_INF ? F64_TWO_POW_128 : _f32ToF64(b);
        uint256 up = b == F32_MAX ? F64_TWO_POW_128 : (b == F32_INF ? F64_INF : _f32ToF64(b + 1));
        uint256 dn = b == 0 ? F64_MINUS_MIN_SUBNORMAL_F32 : _f32ToF64(b - 1);
        uint256 d = _fsub(F, absV, ra);
        uint256 distUp = _fsub(F, _fmul(F, _fsub(F, up, ra), F64_HALF), d);
        uint256 distDn = _fadd(F, d, _fmul(F, _fsub(F, ra, dn), F64_HALF));
        // np.minimum: NaN if either is NaN (then the comparison below is false)
        if (_isNan(F, distUp) || _isNan(F, distDn)) return (DECIDED, r);
        uint256 dist = _fcompare(LT, F, distDn, distUp) ? distDn : distUp;
        if (_fcompare(LE, F, dist, _fmul(F, absV, F64_BAND))) return (UNDECIDABLE, 0);
        return (DECIDED, r);
    }

    function _fsub(uint256 F, uint256 a, uint256 b) private pure returns (uint256) {
        return _fadd(F, a, b ^ (1 << 63));
    }

    function _f32ToF64(uint256 x) private pure returns (uint256) {
        return _packFp(FMT_F64, _unpack(FMT_F32, x));
    }

    // ==========================================================================================
    // Integers (compiler/numerics/integers.py) and pred
    // ==========================================================================================

    /// The value of an integer type's held bits.
    function _ival(uint8 t, uint256 x) private pure returns (int256) {
        if (!_isSigned(t)) return int256(x);
        uint256 sb = _storageBits(t);
        return (x >> (sb - 1)) != 0 ? int256(x) - int256(1 << sb) : int256(x);
    }

    /// v modulo 2^bits, held as the type holds it (sign-extended to the storage for signed).
    function _iwrap(uint8 t, int256 v) private pure returns (uint256) {
        uint256 w = _bits(t);
        uint256 u = uint256(v) & ((1 << w) - 1);
        if (_isSigned(t) && (u >> (w - 1)) != 0) u |= ((1 << _storageBits(t)) - 1) ^ ((1 << w) - 1);
        return u;
    }

    function _pred(uint8 op, uint256 a, uint256 b) private pure returns (uint8, uint256) {
        if (op == AND || op == MUL || op == MIN) return (DECIDED, a & b);
        if (op == OR || op == ADD || op == MAX) return (DECIDED, a | b);
        if (op == XOR) return (DECIDED, a ^ b);
        if (op == NOT) return (DECIDED, a ^ 1);
        return (MALFORMED, 0);
    }

    function _integer(uint8 op, uint8 t, uint256 a, uint256 b) private pure returns (uint8, uint256) {
        int256 x = _ival(t, a);
        int256 y = _ival(t, b);
        int256 r;
        if (op >= AND) {
            if (op == AND) r = x & y;
            else if (op == OR) r = x | y;
            else if (op == XOR) r = x ^ y;
            else if (op == NOT) r = ~x;
            else if (op <= SHR_ARITH) return (DECIDED, _shift(op, t, a, b));
            else if (op == POPCNT || op == CLZ) r = _countBits(op, t, a);
            else if (op == POW) r = _ipow(t, x, y, b);
            else if (y <= 0) r = y == 0 ? -1 : x / y; // FLOOR_DIV by y <= 0: DIV
            else r = x / y - (x % y != 0 && x < 0 ? int256(1) : int256(0)); // FLOOR_DIV
            return (DECIDED, _iwrap(t, r));
        }
        if (op == ADD) r = x + y;
        else if (op == SUB) r = x - y;
        else if (op == MUL) r = x * y;
        else if (op == DIV) r = y == 0 ? -1 : x / y;
        else if (op == REM) r = y == 0 ? x : x % y;
        else if (op == MIN) r = x < y ? x : y;
        else if (op == MAX) r = x > y ? x : y;
        else if (op == NEG) r = -x;
        else if (op == ABS) r = x < 0 ? -x : x;
        else if (op == SIGN) r = x > 0 ? int256(1) : (x < 0 ? -1 : int256(0));
        else return (MALFORMED, 0); // FMA and the float-only ops
        return (DECIDED, _iwrap(t, r));
    }

    /// Shifts: the amount is the held bits read unsigned (a negative amount is huge); at or
    /// past the width the left and logical shifts give 0, the arithmetic one the sign fill.
    /// The arithmetic shift reads the held bits as a signed number of the storage width
    /// (integers.shift_right_arithmetic), so a u2/u4 value is never negative there.
    function _shift(uint8 op, uint8 t, uint256 a, uint256 b) private pure returns (uint256) {
        uint256 w = _bits(t);
        uint256 mask = (1 << w) - 1;
        if (op == SHR_ARITH) {
            uint256 sb = _storageBits(t);
            int256 v = (a >> (sb - 1)) != 0 ? int256(a) - int256(1 << sb) : int256(a);
            return _iwrap(t, v >> (b >= w ? w - 1 : b));
        }
        if (b >= w) return 0;
        uint256 own = a & mask;
        return _iwrap(t, int256(op == SHL ? (own << b) & mask : own >> b));
    }

    function _countBits(uint8 op, uint8 t, uint256 a) private pure returns (int256) {
        uint256 w = _bits(t);
        uint256 own = a & ((1 << w) - 1);
        if (op == CLZ) return int256(w - _bitlen(own));
        // population count of a value below 2^64, in parallel over bit fields
        own -= (own >> 1) & 0x5555555555555555;
        own = (own & 0x3333333333333333) + ((own >> 2) & 0x3333333333333333);
        own = (own + (own >> 4)) & 0x0F0F0F0F0F0F0F0F;
        return int256(((own * 0x0101010101010101) >> 56) & 0xFF);
    }

    /// x^y modulo 2^bits by squaring over every bit of y (read unsigned); for a signed y < 0,
    /// 1 when x == 1 and 0 otherwise.
    function _ipow(uint8 t, int256 x, int256 y, uint256 heldY) private pure returns (int256) {
        if (_isSigned(t) && y < 0) return x == 1 ? int256(1) : int256(0);
        uint256 modulus = 1 << _bits(t);
        uint256 base = uint256(x) % modulus;
        uint256 e = heldY % modulus;
        uint256 r = 1;
        while (e != 0) {
            if ((e & 1) == 1) r = mulmod(r, base, modulus);
            base = mulmod(base, base, modulus);
            e >>= 1;
        }
        return int256(r);
    }
}
