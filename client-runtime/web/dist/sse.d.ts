export interface SseEvent {
    event: string;
    data: string;
}
export declare class SseReader {
    private reader;
    private buf;
    private decoder;
    private ended;
    constructor(reader: ReadableStreamDefaultReader<Uint8Array>);
    static open(url: string, signal?: AbortSignal): Promise<SseReader>;
    /** The next event, or null at the end of the stream. Comments are skipped. */
    next(): Promise<SseEvent | null>;
    cancel(): void;
}
