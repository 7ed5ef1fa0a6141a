// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title Commitments
/// @notice The Merkle trees of docs/disputes.md, as the chain checks them: a leaf hashes as
/// SHA-256(0x00 || leaf), an inner node as SHA-256(0x01 || left || right), an odd last node is
/// promoted unchanged (attest/merkle.py). A *commitment* over n leaves and one top leaf is
/// node(root of the n-leaf tree, leaf(top)): the graph commitment (n records, the result
/// record on top) and a reveal's execution commitment (n op-trace digests, the result digest
/// on top) share that shape, so position i of one names position i of the other.
library Commitments {
    /// @notice Root of the tree of no leaves: SHA-256 of the empty string.
    bytes32 internal constant EMPTY_ROOT = 0xe3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855;

    function nodeHash(bytes32 left, bytes32 right) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x01), left, right));
    }

    function leafHash(bytes32 leaf) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x00), leaf));
    }

    function leafHashOf(bytes calldata leaf) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(bytes1(0x00), leaf));
    }

    /// @notice The execution commitment a reveal makes: node(opTraceRoot, leaf(resultDigest)).
    function execRoot(bytes32 opTraceRoot, bytes32 resultDigest) internal pure returns (bytes32) {
        return nodeHash(opTraceRoot, leafHash(resultDigest));
    }

    /// @notice Number of nodes at `level` (0: the leaves) of an n-leaf tree: ceil(n / 2^level).
    function sizeAt(uint256 n, uint256 level) internal pure returns (uint256) {
        return (n + (uint256(1) << level) - 1) >> level;
    }

    /// @notice Level of the root of an n-leaf tree (0 for one leaf or none).
    function height(uint256 n) internal pure returns (uint8 h) {
        uint256 size = n;
        while (size > 1) {
            size = (size + 1) / 2;
            h += 1;
        }
    }

    /// @notice Walks down from (level, position) while the node there is a promoted copy of its
    /// single child (the last node of a level above an odd-sized one): such a node has no pair of
    /// children to compare, so the dispute game passes it without a move.
    function descendPromoted(uint8 level, uint256 position, uint256 n) internal pure returns (uint8, uint256) {
        while (level > 0 && position == sizeAt(n, level) - 1 && sizeAt(n, level - 1) % 2 == 1) {
            level -= 1;
            position *= 2;
        }
        return (level, position);
    }

    /// @notice The commitment root implied by the leaf hash `hash` at position `index` (0..n)
    /// and its proof; ok is false when the proof's shape does not fit (docs/disputes.md).
    function rootOf(bytes32 hash, uint256 index, uint256 n, bytes32[] calldata siblings)
        internal
        pure
        returns (bytes32 root, bool ok)
    {
        if (index > n) return (bytes32(0), false);
        if (index == n) {
            if (siblings.length != 1) return (bytes32(0), false);
            return (nodeHash(siblings[0], hash), true);
        }
        if (siblings.length == 0) return (bytes32(0), false);
        (bytes32 tree, bool shaped) = treeRoot(hash, index, n, siblings[:siblings.length - 1]);
        if (!shaped) return (bytes32(0), false);
        return (nodeHash(tree, siblings[siblings.length - 1]), true);
    }

    /// @notice The root of an n-leaf tree (no top leaf) implied by the leaf hash `hash` at
    /// `index` and its siblings from the leaf up (a promoted level has none); ok is false when
    /// the proof's shape does not fit (attest/merkle.py root_from_proof).
    function treeRoot(bytes32 hash, uint256 index, uint256 n, bytes32[] calldata siblings)
        internal
        pure
        returns (bytes32 root, bool ok)
    {
        if (index >= n) return (bytes32(0), false);
        uint256 used = 0;
        uint256 position = index;
        uint256 size = n;
        while (size > 1) {
            if (!(position == size - 1 && size % 2 == 1)) {
                if (used >= siblings.length) return (bytes32(0), false);
                bytes32 sibling = siblings[used];
                used += 1;
                hash = position % 2 == 0 ? nodeHash(hash, sibling) : nodeHash(sibling, hash);
            }
            position /= 2;
            size = (size + 1) / 2;
        }
        if (used != siblings.length) return (bytes32(0), false);
        return (hash, true);
    }
}
