// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Commitments} from "./Commitments.sol";
import {ScalarMachine} from "./ScalarMachine.sol";
import {DisputeGame, IReferee, Verdict} from "./DisputeGame.sol";

/// @title TensorProofs
/// @notice One element of a tensor proved against its vxla.tensor.v2 digest (docs/numerics.md
/// section 9): digest = SHA-256(header || root), root the tree (Commitments' hashing) over the
/// canonical bytes in CHUNK_BYTES chunks. The caller knows the tensor's element count and
/// width from committed data, so the chunk count and every position are its own, never the
/// prover's (attest/tensor_proof.py is the same check in Python).
library TensorProofs {
    uint256 internal constant CHUNK_BYTES = 4096;

    struct ElementProof {
        bytes header;
        uint256 chunkIndex;
        bytes chunk;
        bytes32[] siblings;
    }

    /// @return ok whether the proof shows element `index` of a tensor of `count` elements of
    /// `width` bytes with digest `digest`; bits its little-endian bytes.
    function element(bytes32 digest, uint256 count, uint256 width, uint256 index, ElementProof calldata p)
        internal
        pure
        returns (bool ok, uint256 bits)
    {
        if (index >= count || width == 0 || width > 16) return (false, 0);
        uint256 total = count * width;
        uint256 first = index * width;
        if (p.chunkIndex != first / CHUNK_BYTES) return (false, 0);
        uint256 chunks = (total + CHUNK_BYTES - 1) / CHUNK_BYTES;
        uint256 start = p.chunkIndex * CHUNK_BYTES;
        uint256 length = total - start < CHUNK_BYTES ? total - start : CHUNK_BYTES;
        if (p.chunk.length != length) return (false, 0);
        (bytes32 root, bool shaped) = Commitments.treeRoot(Commitments.leafHashOf(p.chunk), p.chunkIndex, chunks, p.siblings);
        if (!shaped || sha256(abi.encodePacked(p.header, root)) != digest) return (false, 0);
        uint256 offset = first - start;
        for (uint256 i = 0; i < width; i++) {
            bits |= uint256(uint8(p.chunk[offset + i])) << (8 * i);
        }
        return (true, bits);
    }
}

/// @title StepReferee
/// @notice Decides one instruction of a dispute by evaluating one scalar operation itself
/// (docs/disputes.md, "Down to one scalar operation"), as the game's IReferee. The game refers
/// the instruction (its graph leaf, its operands' digests and the two parties' output
/// digests; a case per dispute). Then:
///  1. the challenger shows the instruction's element program commitment, proved from the
///     graph leaf (v3 records bind it), and opens its output digest to the root of its chunk
///     tree; the defender opens its own (an instruction without a program goes to the
///     fallback referee, the committee: the challenger shows that instead);
///  2. bisection over the two chunk trees (the defender posts its children, then the
///     challenger) finds a chunk where the outputs differ, and the defender reveals its bytes
///     (an event carries them), so the challenger knows an element where they differ without
///     trusting the defender for anything off chain;
///  3. the challenger names an element of that chunk, proves its own value of it against its
///     output digest and commits the root of its values of the program's steps, proving that
///     the result step's value is that element; the defender does the same (equal elements:
///     the challenger chose badly and loses);
///  4. bisection over the two values trees finds the first step whose values differ, every
///     earlier one equal;
///  5. the challenger resolves: the step's template, proved against the program root, its
///     argument values, proved against its own values root (equal to the defender's before
///     that step), and for a LOAD the element proved against the operand's (or literal's)
///     digest, for a TABLE the entry against the table root. The ScalarMachine recomputes the
///     step: the defender is right exactly when its value is the result.
/// A party that misses its move's deadline loses. A step the machine cannot decide
/// (ROUND_F32_CR near a rounding boundary) goes to the committee too, whose ruling this
/// referee hands to the game.
contract StepReferee is IReferee {
    enum Stage {
        None,
        Claim, // the challenger shows the program and its output's chunk root
        Root, // the defender shows its output's chunk root
        Bisect, // over the chunk trees (locating) or the values trees
        Reveal, // the defender reveals the chunk the bisection reached
        Element, // the challenger names an element of that chunk
        Answer, // the defender answers with its value of it
        Resolve, // the challenger opens the first differing step
        Committee, // the fallback referee rules
        Done
    }

    struct Case {
        address defender;
        address challenger;
        Stage stage;
        bool defenderToMove;
        bool locating; // bisecting the chunk trees, not the values trees
        bool handedOver; // to the fallback referee
        uint8 level;
        uint8 resultType;
        uint32 position;
        uint32 leaves; // of the tree being bisected
        uint32 steps;
        uint32 result;
        uint32 index; // the instruction's position in the graph
        uint32 chunk; // the chunk the location reached
        uint64 deadline;
        uint64 elements;
        uint64 element;
        Verdict verdict;
        bytes32 recordDigest;
        bytes32 programRoot;
        bytes32 headerHash;
        bytes32 defenderDigest;
        bytes32 challengerDigest;
        uint256 challengerValue;
        bytes32 defenderValues;
        bytes32 challengerValues;
        bytes32 defenderNode;
        bytes32 challengerNode;
        bytes32 defenderLeft;
        bytes32 defenderRight;
        bytes32[] operands;
        bytes graphLeaf;
    }

    /// @notice A program's commitment as compiler/reference/steps/program.py makes it.
    struct Program {
        bytes32 root;
        uint32 steps;
        uint32 result;
        uint64 elements;
        bytes32 headerHash;
    }

    /// @notice A step's template and its proof against the program root.
    struct TemplateProof {
        bytes leaf;
        bytes32[] siblings;
    }

    /// @notice A LOAD's element, proved against the tensor it reads. For a part of a
    /// tuple-shaped operand (a multi-output fusion's result), `parts` are the digests of all
    /// the operand's flat parts, which hash to its tuple digest; empty otherwise.
    struct LoadProof {
        bytes32[] parts;
        TensorProofs.ElementProof element;
    }

    /// @notice A value of a party's values tree, proved.
    struct ValueProof {
        uint256 value;
        bytes32[] siblings;
    }

    uint8 private constant KIND_ELEMENT = 0;
    uint8 private constant KIND_CONST = 1;
    uint8 private constant KIND_LOAD = 2;
    uint8 private constant KIND_TABLE = 3;
    uint8 private constant KIND_OP = 4;
    uint8 private constant UNDECIDABLE = 1; // ScalarEval's status for a step it cannot decide
    uint256 private constant TEMPLATE_BYTES = 62;
    bytes private constant PROGRAM_VERSION = "vxla.program.v1\n";
    bytes private constant TUPLE_VERSION = "vxla.tuple.v1\n"; // attest/digests.py tuple_digest
    bytes16 private constant HEX_DIGITS = "0123456789abcdef";

    /// @notice The dispute game whose instructions this referee decides.
    DisputeGame public immutable game;
    /// @notice The contract that evaluates a step's scalar operation.
    ScalarMachine public immutable machine;
    /// @notice The referee of what the machine cannot decide (the committee), which hands its
    /// ruling back through `decide`.
    IReferee public immutable fallbackReferee;
    uint64 public immutable moveWindow;
    mapping(uint256 => Case) private _cases;

    error UnknownCase(uint256 caseId);
    error CaseExists(uint256 caseId);
    error NotGame(address caller);
    error NotFallback(address caller);
    error BadGraphLeaf(uint256 caseId);
    error HasProgram(uint256 caseId);
    error WrongStage(uint256 caseId, Stage stage);
    error NotYourMove(uint256 caseId, address caller);
    error MoveDeadlinePassed(uint256 caseId, uint64 deadline);
    error MoveDeadlineNotPassed(uint256 caseId, uint64 deadline);
    error BadProgram(uint256 caseId);
    error BadElement(uint256 caseId);
    error BadHeader(uint256 caseId);
    error BadChunk(uint256 caseId);
    error BadValueProof(uint256 caseId, uint32 step);
    error BadTemplate(uint256 caseId, uint32 step);
    error BadLoad(uint256 caseId, uint32 step);
    error ChildrenMismatch(uint256 caseId, bytes32 expected, bytes32 actual);

    event CaseOpened(uint256 indexed caseId, uint32 index, address defender, address challenger, bytes32 recordDigest, uint64 deadline);
    event ProgramClaimed(uint256 indexed caseId, uint32 steps, uint64 elements, uint32 chunks, bytes32 chunkRoot, uint64 deadline);
    event RootAnswered(uint256 indexed caseId, bytes32 chunkRoot, uint64 deadline);
    event ChunkRevealed(uint256 indexed caseId, uint32 chunk, bytes bytes_, uint64 deadline);
    event ElementClaimed(uint256 indexed caseId, uint64 element, uint256 value, bytes32 valuesRoot, uint64 deadline);
    event ElementAnswered(uint256 indexed caseId, uint256 value, bytes32 valuesRoot, uint64 deadline);
    event Bisected(uint256 indexed caseId, address indexed by, uint8 level, uint32 position, bytes32 left, bytes32 right);
    event StepReached(uint256 indexed caseId, uint32 step, uint64 deadline);
    event StepResolved(uint256 indexed caseId, uint32 step, uint8 status, uint256 expected);
    event HandedOver(uint256 indexed caseId, address referee, bool uncovered);
    event CaseDecided(uint256 indexed caseId, Verdict verdict, bool byTimeout);

    constructor(DisputeGame game_, ScalarMachine machine_, IReferee fallback_, uint64 moveWindow_) {
        game = game_;
        machine = machine_;
        fallbackReferee = fallback_;
        moveWindow = moveWindow_;
    }

    /// @inheritdoc IReferee
    function refer(
        uint256 disputeId,
        uint32 index,
        bytes calldata graphLeaf,
        bytes32[] calldata operands,
        bytes32 defenderLeaf,
        bytes32 challengerLeaf,
        address defender,
        address challenger
    ) external override {
        if (msg.sender != address(game)) revert NotGame(msg.sender);
        Case storage c = _cases[disputeId];
        if (c.stage != Stage.None) revert CaseExists(disputeId);
        if (graphLeaf.length < 32) revert BadGraphLeaf(disputeId);
        c.defender = defender;
        c.challenger = challenger;
        c.index = index;
        c.recordDigest = bytes32(graphLeaf[0:32]);
        c.graphLeaf = graphLeaf;
        c.operands = operands;
        c.defenderDigest = defenderLeaf;
        c.challengerDigest = challengerLeaf;
        c.stage = Stage.Claim;
        emit CaseOpened(disputeId, index, defender, challenger, c.recordDigest, _nextDeadline(c));
    }

    /// @notice The fallback referee's ruling on a case handed to it.
    function decide(uint256 caseId, Verdict verdict) external {
        if (msg.sender != address(fallbackReferee)) revert NotFallback(msg.sender);
        Case storage c = _cases[caseId];
        if (c.stage != Stage.Committee) revert WrongStage(caseId, c.stage);
        _decide(caseId, c, verdict, false);
    }

    /// @notice The challenger shows that the instruction has no element program (its record
    /// binds the zero digest): the machine cannot decide it, and the committee rules.
    /// @param recordBody SHA-256 of the record's JSON
    function claimUncovered(uint256 caseId, bytes32 recordBody) external {
        Case storage c = _live(caseId, Stage.Claim, true);
        if (sha256(abi.encodePacked(bytes32(0), recordBody)) != c.recordDigest) revert HasProgram(caseId);
        _handOver(caseId, c, true);
    }

    /// @notice The challenger shows the instruction's element program and opens its output
    /// digest: the program's header and the root of its output's chunk tree.
    /// @param recordBody SHA-256 of the record's JSON (the graph leaf binds it with the program)
    /// @param resultTemplate the program's result step, which gives the element type
    function claimProgram(
        uint256 caseId,
        bytes32 recordBody,
        Program calldata program,
        TemplateProof calldata resultTemplate,
        bytes calldata header,
        bytes32 chunkRoot
    ) external {
        Case storage c = _live(caseId, Stage.Claim, true);
        if (sha256(abi.encodePacked(_programDigest(program), recordBody)) != c.recordDigest) revert BadProgram(caseId);
        if (program.result >= program.steps) revert BadProgram(caseId);
        c.programRoot = program.root;
        c.steps = program.steps;
        c.result = program.result;
        c.elements = program.elements;
        c.headerHash = program.headerHash;
        _checkTemplate(caseId, c, c.result, resultTemplate);
        c.resultType = uint8(resultTemplate.leaf[3]);
        uint256 chunks = (program.elements * _storageBytes(c.resultType) + TensorProofs.CHUNK_BYTES - 1) / TensorProofs.CHUNK_BYTES;
        if (chunks == 0 || chunks > type(uint32).max) revert BadProgram(caseId);
        c.leaves = uint32(chunks);
        _checkOutput(caseId, c, c.challengerDigest, header, chunkRoot);
        c.challengerNode = chunkRoot;
        c.stage = Stage.Root;
        emit ProgramClaimed(caseId, c.steps, c.elements, c.leaves, chunkRoot, _nextDeadline(c));
    }

    /// @notice The defender opens its output digest likewise; the location starts.
    function answerRoot(uint256 caseId, bytes calldata header, bytes32 chunkRoot) external {
        Case storage c = _live(caseId, Stage.Root, false);
        _checkOutput(caseId, c, c.defenderDigest, header, chunkRoot);
        c.defenderNode = chunkRoot;
        c.locating = true;
        emit RootAnswered(caseId, chunkRoot, _nextDeadline(c));
        (uint8 level, uint256 position) = Commitments.descendPromoted(Commitments.height(c.leaves), 0, c.leaves);
        (c.level, c.position) = (level, uint32(position));
        _afterStep(caseId, c);
    }

    /// @notice The defender reveals the bytes of the chunk the location reached.
    function revealChunk(uint256 caseId, bytes calldata chunk) external {
        Case storage c = _live(caseId, Stage.Reveal, false);
        uint256 total = uint256(c.elements) * _storageBytes(c.resultType);
        uint256 start = uint256(c.chunk) * TensorProofs.CHUNK_BYTES;
        uint256 length = total - start < TensorProofs.CHUNK_BYTES ? total - start : TensorProofs.CHUNK_BYTES;
        if (chunk.length != length || Commitments.leafHashOf(chunk) != c.defenderNode) revert BadChunk(caseId);
        c.stage = Stage.Element;
        emit ChunkRevealed(caseId, c.chunk, chunk, _nextDeadline(c));
    }

    /// @notice The challenger names output element `element` of the located chunk: its value
    /// of it proved against its output digest, and the root of its values of the program's
    /// steps with the result step's value proved in it.
    function claimElement(
        uint256 caseId,
        uint64 element,
        TensorProofs.ElementProof calldata proof,
        bytes32 valuesRoot,
        ValueProof calldata resultValue
    ) external {
        Case storage c = _live(caseId, Stage.Element, true);
        if (uint256(element) * _storageBytes(c.resultType) / TensorProofs.CHUNK_BYTES != c.chunk) revert BadElement(caseId);
        c.element = element;
        c.challengerValues = valuesRoot;
        c.challengerValue = _provedElement(caseId, c, c.challengerDigest, proof, valuesRoot, resultValue);
        c.stage = Stage.Answer;
        emit ElementClaimed(caseId, element, c.challengerValue, valuesRoot, _nextDeadline(c));
    }

    /// @notice The defender's value of the element, proved against its output digest, and its
    /// values root with the result step's value proved in it.
    function answerElement(
        uint256 caseId,
        TensorProofs.ElementProof calldata proof,
        bytes32 valuesRoot,
        ValueProof calldata resultValue
    ) external {
        Case storage c = _live(caseId, Stage.Answer, false);
        uint256 value = _provedElement(caseId, c, c.defenderDigest, proof, valuesRoot, resultValue);
        c.defenderValues = valuesRoot;
        emit ElementAnswered(caseId, value, valuesRoot, _nextDeadline(c));
        if (value == c.challengerValue) {
            // Both hold the same element there: the challenger named no disagreement.
            _decide(caseId, c, Verdict.DefenderRight, false);
            return;
        }
        c.defenderNode = valuesRoot;
        c.challengerNode = c.challengerValues;
        c.locating = false;
        c.leaves = c.steps;
        (uint8 level, uint256 position) = Commitments.descendPromoted(Commitments.height(c.steps), 0, c.steps);
        (c.level, c.position) = (level, uint32(position));
        _afterStep(caseId, c);
    }

    /// @notice One bisection move over the chunk trees or the values trees (the defender first
    /// at each node).
    function bisect(uint256 caseId, bytes32 left, bytes32 right) external {
        Case storage c = _cases[caseId];
        if (c.stage != Stage.Bisect) revert WrongStage(caseId, c.stage);
        if (block.timestamp >= c.deadline) revert MoveDeadlinePassed(caseId, c.deadline);
        bytes32 parent = Commitments.nodeHash(left, right);
        emit Bisected(caseId, msg.sender, c.level, c.position, left, right);
        if (c.defenderToMove) {
            if (msg.sender != c.defender) revert NotYourMove(caseId, msg.sender);
            if (parent != c.defenderNode) revert ChildrenMismatch(caseId, c.defenderNode, parent);
            (c.defenderLeft, c.defenderRight, c.defenderToMove) = (left, right, false);
            _nextDeadline(c);
            return;
        }
        if (msg.sender != c.challenger) revert NotYourMove(caseId, msg.sender);
        if (parent != c.challengerNode) revert ChildrenMismatch(caseId, c.challengerNode, parent);
        uint256 position;
        if (left != c.defenderLeft) {
            (c.defenderNode, c.challengerNode, position) = (c.defenderLeft, left, uint256(c.position) * 2);
        } else {
            (c.defenderNode, c.challengerNode, position) = (c.defenderRight, right, uint256(c.position) * 2 + 1);
        }
        (uint8 level, uint256 p) = Commitments.descendPromoted(c.level - 1, position, c.leaves);
        (c.level, c.position) = (level, uint32(p));
        _afterStep(caseId, c);
    }

    /// @notice The challenger opens the first differing step (see the contract's notice). The
    /// defender is right exactly when the leaf its values tree holds there is the recomputed
    /// value's (neither party need know the other's value).
    /// @param template the step's template, proved against the program root
    /// @param arguments the values of the steps the template names, in its order, each proved
    /// against the challenger's values root
    /// @param load a LOAD's element proof, with a tuple operand's part digests (ignored for
    /// other kinds)
    /// @param entry a TABLE's entry, proved against the table root (ignored for other kinds)
    function resolve(
        uint256 caseId,
        TemplateProof calldata template,
        ValueProof[] calldata arguments,
        LoadProof calldata load,
        ValueProof calldata entry
    ) external {
        Case storage c = _live(caseId, Stage.Resolve, true);
        uint32 step = c.position;
        _checkTemplate(caseId, c, step, template);
        (uint8 status, uint256 expected) = _recompute(caseId, c, step, template.leaf, arguments, load, entry);
        emit StepResolved(caseId, step, status, expected);
        if (status == UNDECIDABLE) {
            _handOver(caseId, c, false);
        } else if (status != 0) {
            // The committed program itself is malformed: the defender claimed a job under it.
            _decide(caseId, c, Verdict.DefenderWrong, false);
        } else {
            bool right = Commitments.leafHash(bytes32(expected)) == c.defenderNode;
            _decide(caseId, c, right ? Verdict.DefenderRight : Verdict.DefenderWrong, false);
        }
    }

    /// @notice Past a move's deadline, the party whose move it was loses.
    function timeout(uint256 caseId) external {
        Case storage c = _cases[caseId];
        if (c.stage == Stage.None) revert UnknownCase(caseId);
        if (c.stage == Stage.Done || c.stage == Stage.Committee) revert WrongStage(caseId, c.stage);
        if (block.timestamp < c.deadline) revert MoveDeadlineNotPassed(caseId, c.deadline);
        _decide(caseId, c, _challengerToMove(c) ? Verdict.DefenderRight : Verdict.DefenderWrong, true);
    }

    function getCase(uint256 caseId) external view returns (Case memory) {
        return _cases[caseId];
    }

    /// @notice Who must move next (address(0) once decided or with the committee).
    function toMove(uint256 caseId) external view returns (address) {
        Case storage c = _cases[caseId];
        if (c.stage == Stage.None || c.stage == Stage.Done || c.stage == Stage.Committee) return address(0);
        return _challengerToMove(c) ? c.challenger : c.defender;
    }

    // --- the output --------------------------------------------------------------------------

    /// @dev `digest` is SHA-256(header || chunkRoot) with the program's header.
    function _checkOutput(uint256 caseId, Case storage c, bytes32 digest, bytes calldata header, bytes32 chunkRoot)
        private
        view
    {
        if (sha256(header) != c.headerHash) revert BadHeader(caseId);
        if (sha256(abi.encodePacked(header, chunkRoot)) != digest) revert BadChunk(caseId);
    }

    // --- the element ---------------------------------------------------------------------

    /// @dev The element proved against `digest` (with the program's header), and the result
    /// step's value in `valuesRoot`, which must be the element (a NaN compared canonical).
    /// Returns the element's bits.
    function _provedElement(
        uint256 caseId,
        Case storage c,
        bytes32 digest,
        TensorProofs.ElementProof calldata proof,
        bytes32 valuesRoot,
        ValueProof calldata resultValue
    ) private view returns (uint256) {
        if (sha256(proof.header) != c.headerHash) revert BadHeader(caseId);
        (bool ok, uint256 bits) =
            TensorProofs.element(digest, c.elements, _storageBytes(c.resultType), c.element, proof);
        if (!ok) revert BadElement(caseId);
        _checkValue(caseId, valuesRoot, c.result, c.steps, resultValue);
        if (_canonical(resultValue.value, c.resultType) != bits) revert BadElement(caseId);
        return bits;
    }

    // --- the step --------------------------------------------------------------------------

    function _recompute(
        uint256 caseId,
        Case storage c,
        uint32 step,
        bytes calldata leaf,
        ValueProof[] calldata arguments,
        LoadProof calldata load,
        ValueProof calldata entry
    ) private view returns (uint8 status, uint256 value) {
        (bool wellFormed, uint256[3] memory args) = _arguments(caseId, c, step, leaf, arguments);
        if (!wellFormed) return (2, 0);
        uint8 kind = uint8(leaf[0]);
        if (kind == KIND_ELEMENT) return (0, c.element);
        if (kind == KIND_CONST) return (0, uint256(bytes32(leaf[30:62])));
        if (kind == KIND_LOAD) return (0, _load(caseId, c, step, leaf, args[0], load));
        if (kind == KIND_TABLE) return (0, _tableEntry(caseId, step, leaf, args[0], entry));
        if (kind != KIND_OP) return (2, 0);
        return machine.evaluate(uint8(leaf[1]), uint8(leaf[2]), uint8(leaf[3]), args[0], args[1], args[2]);
    }

    /// @dev The values of the steps the template names, each proved against the challenger's
    /// values root; not well formed when the template names too many or a later step.
    function _arguments(uint256 caseId, Case storage c, uint32 step, bytes calldata leaf, ValueProof[] calldata arguments)
        private
        view
        returns (bool wellFormed, uint256[3] memory args)
    {
        uint8 count = uint8(leaf[4]);
        if (count > 3 || arguments.length != count) return (false, args);
        for (uint256 k = 0; k < count; k++) {
            uint32 index = uint32(bytes4(leaf[5 + 4 * k:9 + 4 * k]));
            if (index >= step) return (false, args);
            _checkValue(caseId, c.challengerValues, index, c.steps, arguments[k]);
            args[k] = arguments[k].value;
        }
        return (true, args);
    }

    /// @dev A TABLE's entry at the index the argument step gives, proved against the table's
    /// root (the template's immediate) in a tree of the template's size.
    function _tableEntry(uint256 caseId, uint32 step, bytes calldata leaf, uint256 index, ValueProof calldata entry)
        private
        pure
        returns (uint256)
    {
        uint64 size = uint64(bytes8(leaf[22:30]));
        (bytes32 root, bool ok) = Commitments.treeRoot(Commitments.leafHash(bytes32(entry.value)), index, size, entry.siblings);
        if (!ok || root != bytes32(leaf[30:62])) revert BadLoad(caseId, step);
        return entry.value;
    }

    /// @dev A LOAD's element at the index the argument step gives, proved against the
    /// operand's digest (source 1), the literal's (source 2, its digest in the template) or
    /// a part's of a tuple operand (source 3, the part's index in the template): the parts'
    /// digests must hash to the operand's tuple digest.
    function _load(
        uint256 caseId,
        Case storage c,
        uint32 step,
        bytes calldata leaf,
        uint256 index,
        LoadProof calldata proof
    ) private view returns (uint256) {
        uint8 source = uint8(leaf[17]);
        uint32 number = uint32(bytes4(leaf[18:22]));
        uint64 size = uint64(bytes8(leaf[22:30]));
        bytes32 digest;
        if (source == 1 && number < c.operands.length) {
            digest = c.operands[number];
        } else if (source == 2) {
            digest = bytes32(leaf[30:62]);
        } else if (source == 3 && number < c.operands.length) {
            uint256 part = uint32(bytes4(leaf[30:34]));
            if (part >= proof.parts.length || _tupleDigest(proof.parts) != c.operands[number]) revert BadLoad(caseId, step);
            digest = proof.parts[part];
        } else {
            revert BadLoad(caseId, step);
        }
        (bool ok, uint256 bits) = TensorProofs.element(digest, size, _storageBytes(uint8(leaf[2])), index, proof.element);
        if (!ok) revert BadLoad(caseId, step);
        return bits;
    }

    /// @dev SHA-256 over the tuple header and the parts' digests in lowercase hex, one per
    /// line: the digest of a value with several outputs (attest/digests.py tuple_digest).
    function _tupleDigest(bytes32[] calldata parts) private pure returns (bytes32) {
        bytes memory version = TUPLE_VERSION;
        bytes memory text = new bytes(version.length + 65 * parts.length);
        for (uint256 i = 0; i < version.length; i++) {
            text[i] = version[i];
        }
        uint256 at = version.length;
        for (uint256 p = 0; p < parts.length; p++) {
            for (uint256 j = 0; j < 32; j++) {
                uint8 b = uint8(parts[p][j]);
                text[at++] = HEX_DIGITS[b >> 4];
                text[at++] = HEX_DIGITS[b & 15];
            }
            text[at++] = "\n";
        }
        return sha256(text);
    }

    function _checkTemplate(uint256 caseId, Case storage c, uint32 step, TemplateProof calldata t) private view {
        if (t.leaf.length != TEMPLATE_BYTES) revert BadTemplate(caseId, step);
        (bytes32 root, bool ok) = Commitments.treeRoot(Commitments.leafHashOf(t.leaf), step, c.steps, t.siblings);
        if (!ok || root != c.programRoot) revert BadTemplate(caseId, step);
    }

    function _checkValue(uint256 caseId, bytes32 valuesRoot, uint32 step, uint32 steps, ValueProof calldata v)
        private
        pure
    {
        (bytes32 root, bool ok) = Commitments.treeRoot(Commitments.leafHash(bytes32(v.value)), step, steps, v.siblings);
        if (!ok || root != valuesRoot) revert BadValueProof(caseId, step);
    }

    function _programDigest(Program calldata p) private pure returns (bytes32) {
        return sha256(abi.encodePacked(PROGRAM_VERSION, p.root, p.steps, p.result, p.elements, p.headerHash));
    }

    // --- element types (the codes of compiler/reference/scalar.py TYPE_CODES) ---------------

    /// @dev Bytes of one element as a tensor holds it.
    function _storageBytes(uint8 t) private pure returns (uint256) {
        if (t <= 3 || (t >= 7 && t <= 9) || (t >= 13 && t <= 19)) return 1; // pred, s2-s8, u2-u8, f8
        if (t == 4 || t == 10 || t == 20 || t == 21) return 2;
        if (t == 5 || t == 11 || t == 22) return 4;
        if (t == 6 || t == 12 || t == 23 || t == 24) return 8;
        if (t == 25) return 16;
        return 0;
    }

    /// @dev `bits` with a NaN made the canonical NaN (docs/numerics.md section 1), as a
    /// digest holds the element; complex values part by part.
    function _canonical(uint256 bits, uint8 t) private pure returns (uint256) {
        if (t == 24) return _canonical(bits & 0xFFFFFFFF, 22) | (_canonical(bits >> 32, 22) << 32);
        if (t == 25) return _canonical(bits & type(uint64).max, 23) | (_canonical(bits >> 64, 23) << 64);
        (uint256 magnitude, uint256 inf, uint256 nan) = _nanLayout(t);
        if (inf == 0) {
            // f8e4m3fn: the NaN is the all-ones magnitude; the fnuz formats' one NaN is
            // already canonical; other types have none.
            return (t == 16 && bits & 0x7F == 0x7F) ? 0x7F : bits;
        }
        return (bits & magnitude) > inf ? nan : bits;
    }

    function _nanLayout(uint8 t) private pure returns (uint256 magnitude, uint256 inf, uint256 nan) {
        if (t == 23) return (0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7FF8000000000000);
        if (t == 22) return (0x7FFFFFFF, 0x7F800000, 0x7FC00000);
        if (t == 20) return (0x7FFF, 0x7C00, 0x7E00);
        if (t == 21) return (0x7FFF, 0x7F80, 0x7FC0);
        if (t == 13) return (0x7F, 0x7C, 0x7E);
        if (t == 14) return (0x7F, 0x78, 0x7C);
        if (t == 15) return (0x7F, 0x70, 0x78);
        return (0, 0, 0);
    }

    // --- moves -----------------------------------------------------------------------------

    function _live(uint256 caseId, Stage stage, bool challengerMoves) private view returns (Case storage c) {
        c = _cases[caseId];
        if (c.stage != stage) revert WrongStage(caseId, c.stage);
        if (block.timestamp >= c.deadline) revert MoveDeadlinePassed(caseId, c.deadline);
        if (msg.sender != (challengerMoves ? c.challenger : c.defender)) revert NotYourMove(caseId, msg.sender);
    }

    function _challengerToMove(Case storage c) private view returns (bool) {
        Stage s = c.stage;
        return s == Stage.Claim || s == Stage.Element || s == Stage.Resolve || (s == Stage.Bisect && !c.defenderToMove);
    }

    function _afterStep(uint256 caseId, Case storage c) private {
        _nextDeadline(c);
        if (c.level == 0 && c.locating) {
            c.stage = Stage.Reveal;
            c.chunk = c.position;
        } else if (c.level == 0) {
            c.stage = Stage.Resolve;
            emit StepReached(caseId, c.position, c.deadline);
        } else {
            c.stage = Stage.Bisect;
            c.defenderToMove = true;
        }
    }

    function _nextDeadline(Case storage c) private returns (uint64) {
        c.deadline = uint64(block.timestamp) + moveWindow;
        return c.deadline;
    }

    /// @dev The fallback referee rules on the instruction; its ruling comes back by `decide`.
    function _handOver(uint256 caseId, Case storage c, bool uncovered) private {
        c.stage = Stage.Committee;
        c.handedOver = true;
        c.deadline = 0;
        emit HandedOver(caseId, address(fallbackReferee), uncovered);
        fallbackReferee.refer(
            caseId, c.index, c.graphLeaf, c.operands, c.defenderDigest, c.challengerDigest, c.defender, c.challenger
        );
    }

    function _decide(uint256 caseId, Case storage c, Verdict verdict, bool byTimeout) private {
        c.stage = Stage.Done;
        c.verdict = verdict;
        c.deadline = 0;
        emit CaseDecided(caseId, verdict, byTimeout);
        game.decide(caseId, verdict);
    }
}
