export declare function timerResolutionMs(): number;
