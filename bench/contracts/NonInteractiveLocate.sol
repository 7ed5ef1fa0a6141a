// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Commitments} from "../../contracts/src/Commitments.sol";

/// @title NonInteractiveLocate
/// @notice Measurement only (bench/dispute_gas.py), never deployed by vxla: the alternative
/// the dispute game did not take. The challenger locates the divergent instruction in one
/// transaction: leaf i differs between the two execution commitments, and every op-trace
/// operand the graph leaf names is equal in both, each shown with its commitment proof. It
/// needs the defender's whole trace off chain to build the defender's proofs; bisection
/// (DisputeGame.sol) needs nothing from the defender but its answers on chain.
contract NonInteractiveLocate {
    struct Side {
        bytes32 execRoot;
        bytes32 leaf;
        bytes32[] leafProof;
        bytes32[] operands;
        bytes32[][] operandProofs;
    }

    error BadProof(uint256 which);
    error NotDivergent();
    error OperandsDiffer(uint256 k);

    event Located(uint32 index);

    function locate(
        bytes32 graphRoot,
        uint32 n,
        uint32 index,
        bytes calldata graphLeaf,
        bytes32[] calldata graphProof,
        Side calldata defender,
        Side calldata challenger
    ) external {
        (bytes32 root, bool ok) = Commitments.rootOf(Commitments.leafHashOf(graphLeaf), index, n, graphProof);
        if (!ok || root != graphRoot) revert BadProof(0);
        if (defender.leaf == challenger.leaf) revert NotDivergent();
        _side(defender, index, n, graphLeaf);
        _side(challenger, index, n, graphLeaf);
        for (uint256 k = 0; k < defender.operands.length; k++) {
            if (defender.operands[k] != challenger.operands[k]) revert OperandsDiffer(k);
        }
        emit Located(index);
    }

    function _side(Side calldata s, uint32 index, uint32 n, bytes calldata graphLeaf) private pure {
        (bytes32 root, bool ok) = Commitments.rootOf(Commitments.leafHash(s.leaf), index, n, s.leafProof);
        if (!ok || root != s.execRoot) revert BadProof(1);
        uint256 count = (graphLeaf.length - 32) / 4;
        if (s.operands.length != count) revert BadProof(2);
        for (uint256 k = 0; k < count; k++) {
            uint32 j = uint32(bytes4(graphLeaf[32 + 4 * k:36 + 4 * k]));
            (root, ok) = Commitments.rootOf(Commitments.leafHash(s.operands[k]), j, n, s.operandProofs[k]);
            if (!ok || root != s.execRoot) revert BadProof(3 + k);
        }
    }
}
