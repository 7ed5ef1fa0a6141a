// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Commitments} from "./Commitments.sol";
import {JobMarket} from "./JobMarket.sol";
import {NodeRegistry} from "./NodeRegistry.sol";

/// @notice What a referee rules about a dispute's one instruction.
enum Verdict {
    None,
    DefenderRight,
    DefenderWrong,
    NoVerdict
}

/// @title IReferee
/// @notice Decides one instruction of a dispute: whether the defender's output digest is what
/// the instruction computes from its operands. The game refers the instruction with `refer`
/// and the referee answers, later or at once, with DisputeGame.decide. Swapping the referee
/// (a committee today, the contract evaluating one scalar operation next) changes nothing else.
interface IReferee {
    /// @param disputeId the dispute
    /// @param index the instruction's position in the graph (n: the result record)
    /// @param graphLeaf the instruction's graph leaf: record digest, then its op-trace operands
    /// @param operands the digests of those operands, in the graph leaf's order
    /// @param defenderLeaf the defender's output digest at `index`
    /// @param challengerLeaf the challenger's output digest at `index`
    /// @param defender the defending node
    /// @param challenger the challenger
    function refer(
        uint256 disputeId,
        uint32 index,
        bytes calldata graphLeaf,
        bytes32[] calldata operands,
        bytes32 defenderLeaf,
        bytes32 challengerLeaf,
        address defender,
        address challenger
    ) external;
}

/// @title DisputeGame
/// @notice The dispute game of docs/disputes.md. A challenger (a registered node or the job's
/// submitter) states its own execution of a job (result digest and op-trace root) against one
/// revealed slot, with a bond. Bisection over the two committed trees finds the first
/// instruction where they differ (every earlier one equal); the challenger then opens that
/// leaf with its graph record and the operand digests, each proved against the commitments,
/// and the referee rules on that one instruction. A party that misses its move's deadline
/// loses. The loser pays: a refuted slot's stake goes to the challenger, a failed challenger's
/// bond to the defender.
contract DisputeGame {
    enum Stage {
        None,
        Bisect, // walking down the op-trace trees
        RevealLeaf, // the defender shows the digest behind its leaf
        OpenLeaf, // the challenger shows its digest, the record and the operands
        Referee, // the referee rules
        Settled
    }

    /// @notice One dispute.
    struct Dispute {
        uint256 jobId;
        address challenger;
        address defender;
        uint8 slot;
        Stage stage;
        Verdict verdict;
        bool defenderToMove; // in Bisect: whose move it is
        bool byTimeout; // settled because a party missed a deadline
        uint8 level; // the walk's node: level (0: leaves) and position
        uint32 position;
        uint32 traceLeaves; // n
        uint16 moves; // bisection moves made
        uint64 deadline; // the current move's deadline
        bytes32 graphRoot;
        bytes32 defenderExecRoot;
        bytes32 challengerResult;
        bytes32 challengerOpTraceRoot;
        bytes32 defenderNode; // the walk's node hash on each side
        bytes32 challengerNode;
        bytes32 defenderLeft; // the defender's children of the node, awaiting the challenger's
        bytes32 defenderRight;
        bytes32 defenderLeaf; // the output digests at the leaf
        bytes32 challengerLeaf;
        uint256 bond;
    }

    error WrongBond(uint256 sent, uint256 required);
    error NotAllowedToChallenge(address caller);
    error CannotChallengeOwnSlot(uint256 jobId, uint8 slot);
    error SameExecution(uint256 jobId, uint8 slot);
    error AlreadyChallenging(uint256 jobId, uint8 slot, address challenger, uint256 disputeId);
    error NotEmptyTrace(bytes32 opTraceRoot);
    error UnknownDispute(uint256 disputeId);
    error WrongStage(uint256 disputeId, Stage stage);
    error NotYourMove(uint256 disputeId, address caller);
    error MoveDeadlinePassed(uint256 disputeId, uint64 deadline);
    error MoveDeadlineNotPassed(uint256 disputeId, uint64 deadline);
    error ChildrenMismatch(uint256 disputeId, bytes32 expected, bytes32 actual);
    error LeafMismatch(uint256 disputeId, bytes32 expected, bytes32 actual);
    error BadGraphProof(uint256 disputeId, uint32 index);
    error BadGraphLeaf(uint256 disputeId, uint256 length);
    error OperandCount(uint256 disputeId, uint256 given, uint256 expected);
    error BadOperandProof(uint256 disputeId, uint32 operand);
    error NotReferee(address caller);
    error BadVerdict(uint256 disputeId, Verdict verdict);
    error Reentrancy();

    event DisputeOpened(
        uint256 indexed disputeId,
        uint256 indexed jobId,
        uint8 slot,
        address indexed challenger,
        address defender,
        bytes32 challengerResult,
        bytes32 challengerOpTraceRoot,
        uint64 deadline
    );
    event Bisected(uint256 indexed disputeId, address indexed by, uint8 level, uint32 position, bytes32 left, bytes32 right);
    event LeafReached(uint256 indexed disputeId, uint32 index, uint64 deadline);
    event LeafRevealed(uint256 indexed disputeId, bytes32 defenderLeaf, uint64 deadline);
    event LeafOpened(uint256 indexed disputeId, uint32 index, bytes graphLeaf, bytes32[] operands, bytes32 challengerLeaf);
    event DisputeSettled(
        uint256 indexed disputeId, uint256 indexed jobId, Verdict verdict, bool byTimeout, address winner
    );

    /// @notice Wei a challenger posts with its challenge.
    uint256 public immutable challengeBond;
    /// @notice Seconds each party has for its move.
    uint64 public immutable moveWindow;
    /// @notice The registry, which names the market and the referee of this deployment.
    NodeRegistry public immutable registry;
    /// @notice Number of disputes opened; ids are 1..disputeCount.
    uint256 public disputeCount;

    mapping(uint256 => Dispute) private _disputes;
    // keccak256(jobId, slot, challenger) => the open dispute's id (0: none)
    mapping(bytes32 => uint256) private _open;
    uint256 private _guard = 1;

    modifier nonReentrant() {
        if (_guard != 1) revert Reentrancy();
        _guard = 2;
        _;
        _guard = 1;
    }

    /// @param registry_ the NodeRegistry whose owner wires market, game and referee
    /// @param challengeBond_ wei a challenge carries
    /// @param moveWindow_ seconds a party has for each move
    constructor(NodeRegistry registry_, uint256 challengeBond_, uint64 moveWindow_) {
        registry = registry_;
        challengeBond = challengeBond_;
        moveWindow = moveWindow_;
    }

    /// @notice Challenges the revealed result of `slot` of `jobId`, stating the challenger's own
    /// execution of the job; msg.value must be the bond.
    /// @param jobId the job
    /// @param slot the challenged slot (claim order)
    /// @param resultDigest the challenger's result digest
    /// @param opTraceRoot the challenger's op-trace Merkle root
    /// @return disputeId the new dispute
    function challenge(uint256 jobId, uint8 slot, bytes32 resultDigest, bytes32 opTraceRoot)
        external
        payable
        nonReentrant
        returns (uint256 disputeId)
    {
        if (msg.value != challengeBond) revert WrongBond(msg.value, challengeBond);
        bytes32 openKey = keccak256(abi.encode(jobId, slot, msg.sender));
        if (_open[openKey] != 0) revert AlreadyChallenging(jobId, slot, msg.sender, _open[openKey]);
        JobMarket.Target memory t = _market().openDispute(jobId, slot);
        if (msg.sender == t.defender) revert CannotChallengeOwnSlot(jobId, slot);
        if (msg.sender != t.submitter && !registry.isRegistered(msg.sender)) revert NotAllowedToChallenge(msg.sender);
        if (t.traceLeaves == 0 && opTraceRoot != Commitments.EMPTY_ROOT) revert NotEmptyTrace(opTraceRoot);
        bytes32 defenderExec = Commitments.execRoot(t.opTraceRoot, t.resultDigest);
        if (Commitments.execRoot(opTraceRoot, resultDigest) == defenderExec) revert SameExecution(jobId, slot);

        disputeId = ++disputeCount;
        _open[openKey] = disputeId;
        Dispute storage d = _disputes[disputeId];
        d.jobId = jobId;
        d.challenger = msg.sender;
        d.defender = t.defender;
        d.slot = slot;
        d.traceLeaves = t.traceLeaves;
        d.graphRoot = t.graphRoot;
        d.defenderExecRoot = defenderExec;
        d.challengerResult = resultDigest;
        d.challengerOpTraceRoot = opTraceRoot;
        d.bond = msg.value;
        emit DisputeOpened(disputeId, jobId, slot, msg.sender, t.defender, resultDigest, opTraceRoot, _nextDeadline(d));
        if (opTraceRoot == t.opTraceRoot) {
            // Every instruction agrees: the disagreement is the result leaf n.
            d.position = t.traceLeaves;
            d.defenderLeaf = t.resultDigest;
            d.challengerLeaf = resultDigest;
            d.stage = Stage.OpenLeaf;
            emit LeafReached(disputeId, t.traceLeaves, d.deadline);
            return disputeId;
        }
        d.defenderNode = t.opTraceRoot;
        d.challengerNode = opTraceRoot;
        (d.level, d.position) = _descend(Commitments.height(t.traceLeaves), 0, t.traceLeaves);
        _afterStep(disputeId, d);
    }

    /// @notice One bisection move: the mover's two children of the walk's current node. The
    /// defender moves first at each node, then the challenger, whose move picks the first child
    /// on which the two sides differ.
    /// @param disputeId the dispute
    /// @param left the mover's left child hash
    /// @param right the mover's right child hash
    function bisect(uint256 disputeId, bytes32 left, bytes32 right) external {
        Dispute storage d = _live(disputeId, Stage.Bisect);
        bytes32 parent = Commitments.nodeHash(left, right);
        emit Bisected(disputeId, msg.sender, d.level, d.position, left, right);
        d.moves += 1;
        if (d.defenderToMove) {
            if (msg.sender != d.defender) revert NotYourMove(disputeId, msg.sender);
            if (parent != d.defenderNode) revert ChildrenMismatch(disputeId, d.defenderNode, parent);
            d.defenderLeft = left;
            d.defenderRight = right;
            d.defenderToMove = false;
            _nextDeadline(d);
            return;
        }
        if (msg.sender != d.challenger) revert NotYourMove(disputeId, msg.sender);
        if (parent != d.challengerNode) revert ChildrenMismatch(disputeId, d.challengerNode, parent);
        uint32 position;
        if (left != d.defenderLeft) {
            (d.defenderNode, d.challengerNode, position) = (d.defenderLeft, left, d.position * 2);
        } else {
            // Equal left subtrees: every leaf there agrees, and the right children differ
            // because the parents do.
            (d.defenderNode, d.challengerNode, position) = (d.defenderRight, right, d.position * 2 + 1);
        }
        (d.level, d.position) = _descend(d.level - 1, position, d.traceLeaves);
        _afterStep(disputeId, d);
    }

    /// @notice The defender shows the output digest behind its leaf at the walk's end.
    /// @param disputeId the dispute
    /// @param digest the defender's op-trace digest of instruction `position`
    function revealLeaf(uint256 disputeId, bytes32 digest) external {
        Dispute storage d = _live(disputeId, Stage.RevealLeaf);
        if (msg.sender != d.defender) revert NotYourMove(disputeId, msg.sender);
        bytes32 hash = Commitments.leafHash(digest);
        if (hash != d.defenderNode) revert LeafMismatch(disputeId, d.defenderNode, hash);
        d.defenderLeaf = digest;
        d.stage = Stage.OpenLeaf;
        emit LeafRevealed(disputeId, digest, _nextDeadline(d));
    }

    /// @notice The challenger opens the leaf: its own digest there, the instruction's graph
    /// leaf proved against the job's graph commitment, and the digest of every op-trace
    /// operand the graph leaf names, proved against the challenger's own execution commitment
    /// (every leaf before the divergent one is equal on both sides). Then the referee rules.
    /// @param disputeId the dispute
    /// @param digest the challenger's digest at the leaf (ignored for the result leaf)
    /// @param graphLeaf record digest (32 bytes) then each op-trace operand as 4 bytes big-endian
    /// @param graphProof the graph leaf's commitment proof
    /// @param operands the operands' digests, in the graph leaf's order
    /// @param operandProofs each operand's commitment proof
    function openLeaf(
        uint256 disputeId,
        bytes32 digest,
        bytes calldata graphLeaf,
        bytes32[] calldata graphProof,
        bytes32[] calldata operands,
        bytes32[][] calldata operandProofs
    ) external nonReentrant {
        Dispute storage d = _live(disputeId, Stage.OpenLeaf);
        if (msg.sender != d.challenger) revert NotYourMove(disputeId, msg.sender);
        if (d.position < d.traceLeaves) {
            bytes32 hash = Commitments.leafHash(digest);
            if (hash != d.challengerNode) revert LeafMismatch(disputeId, d.challengerNode, hash);
            d.challengerLeaf = digest;
        }
        _checkGraphLeaf(disputeId, d, graphLeaf, graphProof);
        emit LeafOpened(disputeId, d.position, graphLeaf, operands, d.challengerLeaf);
        if (!_checkOperands(disputeId, d, graphLeaf, operands, operandProofs)) {
            // A record reading itself or a later instruction is not a schedule: the graph
            // commitment is malformed, and the defender claimed a job under it.
            _settle(disputeId, d, Verdict.DefenderWrong, false);
            return;
        }
        d.stage = Stage.Referee;
        d.deadline = 0;
        _referee().refer(
            disputeId, d.position, graphLeaf, operands, d.defenderLeaf, d.challengerLeaf, d.defender, d.challenger
        );
    }

    /// @dev The graph leaf at the walk's position must be in the job's graph commitment and
    /// be a record digest followed by whole 4-byte operand indices.
    function _checkGraphLeaf(uint256 disputeId, Dispute storage d, bytes calldata graphLeaf, bytes32[] calldata proof)
        private
        view
    {
        (bytes32 root, bool ok) =
            Commitments.rootOf(Commitments.leafHashOf(graphLeaf), d.position, d.traceLeaves, proof);
        if (!ok || root != d.graphRoot) revert BadGraphProof(disputeId, d.position);
        if (graphLeaf.length < 32 || (graphLeaf.length - 32) % 4 != 0) revert BadGraphLeaf(disputeId, graphLeaf.length);
    }

    /// @dev Each operand digest must be in the challenger's execution commitment at the index the
    /// graph leaf names: the walk proved every leaf before the divergent one equal on both sides,
    /// so it is the defender's digest too, and the challenger can prove it from its own tree.
    /// False when the graph leaf names an operand at or after the leaf itself.
    function _checkOperands(
        uint256 disputeId,
        Dispute storage d,
        bytes calldata graphLeaf,
        bytes32[] calldata operands,
        bytes32[][] calldata proofs
    ) private view returns (bool) {
        uint256 count = (graphLeaf.length - 32) / 4;
        if (operands.length != count || proofs.length != count) revert OperandCount(disputeId, operands.length, count);
        bytes32 challengerExec = Commitments.execRoot(d.challengerOpTraceRoot, d.challengerResult);
        for (uint256 k = 0; k < count; k++) {
            uint32 operand = uint32(bytes4(graphLeaf[32 + 4 * k:36 + 4 * k]));
            if (operand >= d.position) return false;
            _proveOperand(disputeId, challengerExec, operand, d.traceLeaves, operands[k], proofs[k]);
        }
        return true;
    }

    function _proveOperand(
        uint256 disputeId,
        bytes32 execRoot,
        uint32 operand,
        uint32 n,
        bytes32 digest,
        bytes32[] calldata proof
    ) private pure {
        (bytes32 root, bool ok) = Commitments.rootOf(Commitments.leafHash(digest), operand, n, proof);
        if (!ok || root != execRoot) revert BadOperandProof(disputeId, operand);
    }

    /// @notice The referee's ruling on the dispute's instruction (the referee only).
    /// @param disputeId the dispute
    /// @param verdict DefenderRight, DefenderWrong or NoVerdict
    function decide(uint256 disputeId, Verdict verdict) external nonReentrant {
        if (msg.sender != registry.referee()) revert NotReferee(msg.sender);
        Dispute storage d = _live(disputeId, Stage.Referee);
        if (verdict == Verdict.None) revert BadVerdict(disputeId, verdict);
        _settle(disputeId, d, verdict, false);
    }

    /// @notice Ends a dispute whose party missed its move's deadline: that party loses.
    /// Anyone may call it.
    /// @param disputeId the dispute
    function timeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.stage == Stage.None) revert UnknownDispute(disputeId);
        if (d.stage == Stage.Referee || d.stage == Stage.Settled) revert WrongStage(disputeId, d.stage);
        if (block.timestamp < d.deadline) revert MoveDeadlineNotPassed(disputeId, d.deadline);
        bool defenderSilent =
            d.stage == Stage.RevealLeaf || (d.stage == Stage.Bisect && d.defenderToMove);
        _settle(disputeId, d, defenderSilent ? Verdict.DefenderWrong : Verdict.DefenderRight, true);
    }

    /// @notice The dispute record.
    /// @param disputeId the dispute
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        if (_disputes[disputeId].stage == Stage.None) revert UnknownDispute(disputeId);
        return _disputes[disputeId];
    }

    /// @notice Who must move next in a dispute (address(0) once the referee rules or it settled).
    /// @param disputeId the dispute
    function toMove(uint256 disputeId) external view returns (address) {
        Dispute storage d = _disputes[disputeId];
        if (d.stage == Stage.None) revert UnknownDispute(disputeId);
        if (d.stage == Stage.Bisect) return d.defenderToMove ? d.defender : d.challenger;
        if (d.stage == Stage.RevealLeaf) return d.defender;
        if (d.stage == Stage.OpenLeaf) return d.challenger;
        return address(0);
    }

    // --- internals ----------------------------------------------------------------------------

    function _market() private view returns (JobMarket) {
        return JobMarket(payable(registry.market()));
    }

    function _referee() private view returns (IReferee) {
        return IReferee(registry.referee());
    }

    function _live(uint256 disputeId, Stage stage) private view returns (Dispute storage d) {
        d = _disputes[disputeId];
        if (d.stage == Stage.None) revert UnknownDispute(disputeId);
        if (d.stage != stage) revert WrongStage(disputeId, d.stage);
        if (stage != Stage.Referee && block.timestamp >= d.deadline) {
            revert MoveDeadlinePassed(disputeId, d.deadline);
        }
    }

    function _nextDeadline(Dispute storage d) private returns (uint64) {
        d.deadline = uint64(block.timestamp) + moveWindow;
        return d.deadline;
    }

    function _descend(uint8 level, uint256 position, uint32 n) private pure returns (uint8, uint32) {
        (uint8 l, uint256 p) = Commitments.descendPromoted(level, position, n);
        return (l, uint32(p));
    }

    /// @dev After the walk moved to a new node: the defender moves next, or at a leaf the
    /// defender reveals its digest there.
    function _afterStep(uint256 disputeId, Dispute storage d) private {
        _nextDeadline(d);
        if (d.level == 0) {
            d.stage = Stage.RevealLeaf;
            emit LeafReached(disputeId, d.position, d.deadline);
        } else {
            d.stage = Stage.Bisect;
            d.defenderToMove = true;
        }
    }

    /// @dev Pays and closes: DefenderWrong refutes the slot (its stake to the challenger) and
    /// returns the bond; DefenderRight gives the bond to the defender; NoVerdict returns it.
    function _settle(uint256 disputeId, Dispute storage d, Verdict verdict, bool byTimeout) private {
        d.stage = Stage.Settled;
        d.verdict = verdict;
        d.byTimeout = byTimeout;
        d.deadline = 0;
        delete _open[keccak256(abi.encode(d.jobId, d.slot, d.challenger))];
        bool refute = verdict == Verdict.DefenderWrong;
        address bondTo = verdict == Verdict.DefenderRight ? d.defender : d.challenger;
        address winner = verdict == Verdict.NoVerdict ? address(0) : (refute ? d.challenger : d.defender);
        emit DisputeSettled(disputeId, d.jobId, verdict, byTimeout, winner);
        _market().closeDispute{value: d.bond}(
            d.jobId, d.slot, refute, verdict == Verdict.NoVerdict, d.challenger, bondTo
        );
    }
}
