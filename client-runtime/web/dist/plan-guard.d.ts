/** What the guard needs of a kernel (a `WasmKernel`). */
export interface Guarded {
    /** Whether the kernel in use is one the guard has not accepted yet (it has a base). */
    readonly unguarded: boolean;
    /** Whether a candidate is being tried in the kernel's own calls (the guard waits for it). */
    readonly trialPending: boolean;
    /** Whether its tuning has nothing left to try (or it has no tuner): only then is its kind judged. */
    readonly quiet: boolean;
    /** Calls run the base kernel while on. */
    useBase(on: boolean): void;
    /** The verdict: keep the kernel in use (it becomes the base) or put the base back; `ratio` is the plan's time over the base plan's. */
    settle(keep: boolean, ratio: number): void;
}
/** Pairs before the guard may keep a plan, and at most. */
export declare const GUARD_MIN_PAIRS = 4;
export declare const GUARD_MAX_PAIRS = 12;
/** The plan in use is put back at once when its median pair over the first two or three is this much slower (and at most one pair faster). */
export declare const GUARD_REJECT_RATIO = 1.15;
/** Cycles of four calls that warm both plans up before pairs are kept (the base's kernels have not run for a while)... */
export declare const GUARD_WARM_CYCLES = 1;
/** ...unless its calls take this long (ms), which warms them well enough. */
export declare const GUARD_WARM_CALL_MS = 20;
/**
 * Calls' time a judgement spends at most (ms): past it, with GUARD_MIN_PAIRS
 * pairs (2 past twice as long: a kind whose every call takes seconds, such
 * as a long prompt's bucket on one thread), the median pair decides.
 */
export declare const GUARD_MAX_MS = 8000;
/** A judgement that gets no call for this long is settled on what it has (kept with fewer than two pairs). */
export declare const GUARD_TIMEOUT_MS = 30000;
/** `guard` event detail: a verdict on the kernels of one kind of model call. */
export interface GuardDetail {
    /** The kind of call (a decoder's row bucket, an encoder's bucket). */
    kind: string;
    /** Kernels judged: those that differed from their base. */
    kernels: {
        op: string;
        shape: number[];
    }[];
    kept: boolean;
    /** The plan in use over the base plan, median pair (< 1: faster). */
    ratio: number;
    pairs: number;
    /** Median call of each side, ms. */
    base_ms: number;
    plan_ms: number;
}
export declare class PlanGuard {
    /** Called with every verdict. */
    private onVerdict;
    /** The clock (ms); tests pass their own. */
    private now;
    private open;
    private waiters;
    /** Kernels some call went through the guard with (only their plans are judged). */
    private seen;
    private describe;
    constructor(
    /** Called with every verdict. */
    onVerdict?: (d: GuardDetail) => void, describe?: (k: Guarded) => {
        op: string;
        shape: number[];
    }, 
    /** The clock (ms); tests pass their own. */
    now?: () => number);
    /** Kinds under judgement now (a model with no calls of its own to make runs some of these). */
    pending(): string[];
    /** Whether a call of `kind` over `kernels` would be judged now (a judgement open, or one it would open). */
    due(kind: string, kernels: readonly Guarded[]): boolean;
    /** Whether `k` runs in guarded calls and its kernel in use still waits for a verdict. */
    judges(k: Guarded): boolean;
    /** Whether `k` belongs to a kind under judgement (it must not take a new kernel or start a trial). */
    holds(k: Guarded): boolean;
    /** Resolves once no judgement holds `k` (at once when none does). */
    released(k: Guarded): Promise<void>;
    /**
     * Runs one model call of `kind` over `kernels` (every kernel the call
     * runs), on the plan the guard chooses for it, and times it. The call is
     * synchronous: no kernel may change while it runs.
     */
    call<T>(kind: string, kernels: readonly Guarded[], run: () => T): T;
    /** Closes the cycle's pair and decides if the pairs allow it. */
    private pair;
    private ratio;
    /** Settles judgements whose kind got no call for GUARD_TIMEOUT_MS on what they have. */
    private expire;
    private verdict;
    private wake;
}
