// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ScalarEval} from "./ScalarEval.sol";

/// @title ScalarMachine
/// @notice ScalarEval deployed on its own: the machine StepReferee calls to recompute a step
/// (its code would not fit in the referee's 24,576 bytes), and what its tests
/// (tests/contracts/test_scalar_eval.py, tools/scalar_campaign.py) and its gas bench
/// (bench/scalar_gas.py) call. No state.
contract ScalarMachine {
    /// @notice ScalarEval.evaluate as an external call.
    function evaluate(uint8 op, uint8 dtype, uint8 resultType, uint256 a, uint256 b, uint256 c)
        external
        pure
        returns (uint8 status, uint256 bits)
    {
        return ScalarEval.evaluate(op, dtype, resultType, a, b, c);
    }

    /// @notice Many cases in one call: four words a case, (op | dtype << 8 | resultType << 16,
    /// a, b, c); one word a result, status << 248 | bits. Each case's scratch memory is
    /// reused by the next, so a long batch costs no quadratic memory growth.
    function evaluateBatch(uint256[] calldata cases) external pure returns (uint256[] memory out) {
        uint256 n = cases.length / 4;
        out = new uint256[](n);
        uint256 scratch;
        assembly ("memory-safe") {
            scratch := mload(0x40)
        }
        for (uint256 i = 0; i < n; i++) {
            uint256 head = cases[4 * i];
            (uint8 status, uint256 bits) = ScalarEval.evaluate(
                uint8(head), uint8(head >> 8), uint8(head >> 16), cases[4 * i + 1], cases[4 * i + 2], cases[4 * i + 3]
            );
            out[i] = (uint256(status) << 248) | bits;
            assembly ("memory-safe") {
                mstore(0x40, scratch)
            }
        }
    }

    /// @notice The gas each case's evaluation costs (gasleft before and after), cases as for
    /// evaluateBatch. Memory is reused from case to case, so a case that expands memory costs
    /// a little less here than alone (measure): for searching a worst case, not reporting it.
    function measureBatch(uint256[] calldata cases) external view returns (uint256[] memory gasUsed) {
        uint256 n = cases.length / 4;
        gasUsed = new uint256[](n);
        uint256 scratch;
        assembly ("memory-safe") {
            scratch := mload(0x40)
        }
        for (uint256 i = 0; i < n; i++) {
            uint256 head = cases[4 * i];
            uint256 before = gasleft();
            ScalarEval.evaluate(
                uint8(head), uint8(head >> 8), uint8(head >> 16), cases[4 * i + 1], cases[4 * i + 2], cases[4 * i + 3]
            );
            gasUsed[i] = before - gasleft();
            assembly ("memory-safe") {
                mstore(0x40, scratch)
            }
        }
    }

    /// @notice The gas one evaluation costs inside the call (gasleft before and after).
    function measure(uint8 op, uint8 dtype, uint8 resultType, uint256 a, uint256 b, uint256 c)
        external
        view
        returns (uint256 gasUsed, uint8 status, uint256 bits)
    {
        uint256 before = gasleft();
        (status, bits) = ScalarEval.evaluate(op, dtype, resultType, a, b, c);
        gasUsed = before - gasleft();
    }
}
