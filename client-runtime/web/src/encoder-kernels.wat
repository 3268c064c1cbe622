;; The sentence encoder's fixed kernels: everything of a BERT layer that is
;; not a matrix product (those are webtune's tuned kernels). One module on
;; the encoder's memory (`env.memory`, shared with the tuned kernels); every
;; pointer is a byte offset, 16-byte aligned, and every row length (H, d, the
;; FFN width) a multiple of 4, which the encoder checks before calling.
;;
;; The FFN's bias and exact GELU are the compiler's fused epilogue
;; (`matmul+bias+gelu`), not a kernel here. Softmax needs exp: an f32x4
;; polynomial (Cephes' expf, range-reduced by ln 2 in two parts and scaled
;; through the exponent bits). With `precision: 'int16'` the encoder's
;; matrix products are `matmul_i16`, whose activations `quant_rows` quantises
;; (one scale per row), and a bundle's pre-quantised word table is read by
;; `embed_q16`. test/encoder-kernels.test.mjs measures exp's error
;; against f64 Math and every kernel against an f64 reference.

(module
  (import "env" "memory" (memory 1))

  ;; Sum of the four lanes.
  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; dst[i] = e^(src[i] - m) for the f32x4 vectors of [0, bytes), bytes > 0, and their
  ;; lane-wise sum; src may be dst. For x - m <= 88 (the softmax feeds it
  ;; x - max <= 0; below -87.3 it gives 2^-126 e^r, not 0). The exp is
  ;; written out in the loop (a call per vector costs V8 about a third more):
  ;; n = round(x log2 e) by adding 1.5·2^23, after which the float's low
  ;; mantissa bits hold n as an integer (round to nearest even, as
  ;; f32x4.nearest, with no float-to-int conversion); r = x - n ln 2 in two
  ;; parts; e^r by Cephes' expf polynomial; 2^n built in the exponent field
  ;; from those same bits.
  (func $exp_sum (param $src i32) (param $dst i32) (param $bytes i32) (param $m v128) (result v128)
    (local $i i32) (local $x v128) (local $t v128) (local $n v128) (local $r v128) (local $p v128) (local $acc v128)
    (loop $l
      (local.set $x (f32x4.max (f32x4.min (f32x4.sub (v128.load (i32.add (local.get $src) (local.get $i))) (local.get $m))
                                          (v128.const f32x4 88 88 88 88))
                               (v128.const f32x4 -87.33654 -87.33654 -87.33654 -87.33654)))
      (local.set $t (f32x4.add (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504 1.44269504 1.44269504 1.44269504))
                               (v128.const f32x4 12582912 12582912 12582912 12582912)))
      (local.set $n (f32x4.sub (local.get $t) (v128.const f32x4 12582912 12582912 12582912 12582912)))
      (local.set $r (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375))))
      (local.set $r (f32x4.add (local.get $r) (f32x4.mul (local.get $n) (v128.const f32x4 2.12194440e-4 2.12194440e-4 2.12194440e-4 2.12194440e-4))))
      (local.set $p (f32x4.add (f32x4.mul (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4) (local.get $r))
                               (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
      (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
      (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
      (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
      (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
      ;; 1 + r + p r^2, times 2^n: (bits(t) - bits(1.5·2^23) + 127) << 23.
      (local.set $p (f32x4.mul
        (f32x4.add (f32x4.add (f32x4.mul (local.get $p) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r)) (v128.const f32x4 1 1 1 1))
        (i32x4.shl (i32x4.add (local.get $t) (v128.const i32x4 -1262485377 -1262485377 -1262485377 -1262485377)) (i32.const 23))))
      (v128.store (i32.add (local.get $dst) (local.get $i)) (local.get $p))
      (local.set $acc (f32x4.add (local.get $acc) (local.get $p)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $bytes))))
    (local.get $acc))

  ;; Test hook: n floats at $x (n a multiple of 4) through exp into $y.
  (func (export "exp") (param $x i32) (param $y i32) (param $n i32)
    (drop (call $exp_sum (local.get $x) (local.get $y) (i32.shl (local.get $n) (i32.const 2)) (v128.const i32x4 0 0 0 0))))

  ;; Layer norm of one row of $h floats at $row, in place: its sum is $sum.
  (func $ln_row (param $row i32) (param $sum f32) (param $gamma i32) (param $beta i32) (param $h i32) (param $eps f32)
    (local $i i32) (local $end i32) (local $mean v128) (local $acc v128) (local $d v128) (local $inv v128)
    (local.set $end (i32.shl (local.get $h) (i32.const 2)))
    (local.set $mean (f32x4.splat (f32.div (local.get $sum) (f32.convert_i32_u (local.get $h)))))
    (local.set $i (i32.const 0))
    (loop $v
      (local.set $d (f32x4.sub (v128.load (i32.add (local.get $row) (local.get $i))) (local.get $mean)))
      (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $d) (local.get $d))))
      (br_if $v (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $end))))
    (local.set $inv (f32x4.splat (f32.div (f32.const 1)
      (f32.sqrt (f32.add (f32.div (call $hsum (local.get $acc)) (f32.convert_i32_u (local.get $h))) (local.get $eps))))))
    (local.set $i (i32.const 0))
    (loop $n
      (v128.store (i32.add (local.get $row) (local.get $i))
        (f32x4.add
          (f32x4.mul (f32x4.mul (f32x4.sub (v128.load (i32.add (local.get $row) (local.get $i))) (local.get $mean)) (local.get $inv))
                     (v128.load (i32.add (local.get $gamma) (local.get $i))))
          (v128.load (i32.add (local.get $beta) (local.get $i)))))
      (br_if $n (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $end)))))

  ;; out[t] = LayerNorm(word[ids[t]] + pos[t mod s] + type0) for t < n.
  (func (export "embed") (param $ids i32) (param $word i32) (param $pos i32) (param $type0 i32)
        (param $gamma i32) (param $beta i32) (param $out i32) (param $n i32) (param $s i32) (param $h i32) (param $eps f32)
    (call $embed_rows (local.get $ids) (local.get $word) (i32.const 0) (i32.const 0) (local.get $pos) (local.get $type0)
      (local.get $gamma) (local.get $beta) (local.get $out) (local.get $n) (local.get $s) (local.get $h) (local.get $eps)))

  ;; The same with the word table pre-quantised (SentenceEncoder's int16
  ;; blob): row r of wordq [V, h/2] is h i16 values in pairs (word p: value
  ;; 2p in its low half, 2p+1 in its high), wordscale [V] its f32 scale, and
  ;; word[r][j] = f32(q[r][j]) · wordscale[r]. Every sum after that is
  ;; embed's: embed_q16 on q gives, bit for bit, embed on the dequantised table.
  (func (export "embed_q16") (param $ids i32) (param $wordq i32) (param $wordscale i32) (param $pos i32) (param $type0 i32)
        (param $gamma i32) (param $beta i32) (param $out i32) (param $n i32) (param $s i32) (param $h i32) (param $eps f32)
    (call $embed_rows (local.get $ids) (local.get $wordq) (local.get $wordscale) (i32.const 1) (local.get $pos) (local.get $type0)
      (local.get $gamma) (local.get $beta) (local.get $out) (local.get $n) (local.get $s) (local.get $h) (local.get $eps)))

  ;; embed and embed_q16: $q16 says how a word row is read, f32x4 loads
  ;; (0) or v128.load16x4_s of half the bytes times the row's scale (1).
  (func $embed_rows (param $ids i32) (param $word i32) (param $wscale i32) (param $q16 i32) (param $pos i32) (param $type0 i32)
        (param $gamma i32) (param $beta i32) (param $out i32) (param $n i32) (param $s i32) (param $h i32) (param $eps f32)
    (local $t i32) (local $i i32) (local $rb i32) (local $id i32) (local $w i32) (local $p i32) (local $o i32)
    (local $acc v128) (local $x v128) (local $sc v128)
    (local.set $rb (i32.shl (local.get $h) (i32.const 2)))
    (loop $tok
      (local.set $id (i32.load (i32.add (local.get $ids) (i32.shl (local.get $t) (i32.const 2)))))
      ;; A word row is rb bytes of f32, or rb/2 of i16 pairs.
      (local.set $w (i32.add (local.get $word) (i32.mul (local.get $id) (i32.shr_u (local.get $rb) (local.get $q16)))))
      (if (local.get $q16)
        (then (local.set $sc (v128.load32_splat (i32.add (local.get $wscale) (i32.shl (local.get $id) (i32.const 2)))))))
      (local.set $p (i32.add (local.get $pos) (i32.mul (i32.rem_u (local.get $t) (local.get $s)) (local.get $rb))))
      (local.set $o (i32.add (local.get $out) (i32.mul (local.get $t) (local.get $rb))))
      (local.set $acc (v128.const i32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (loop $v
        (local.set $x (f32x4.add
          (f32x4.add
            (if (result v128) (local.get $q16)
              (then (f32x4.mul (f32x4.convert_i32x4_s (v128.load16x4_s (i32.add (local.get $w) (i32.shr_u (local.get $i) (i32.const 1)))))
                               (local.get $sc)))
              (else (v128.load (i32.add (local.get $w) (local.get $i)))))
            (v128.load (i32.add (local.get $p) (local.get $i))))
          (v128.load (i32.add (local.get $type0) (local.get $i)))))
        (v128.store (i32.add (local.get $o) (local.get $i)) (local.get $x))
        (local.set $acc (f32x4.add (local.get $acc) (local.get $x)))
        (br_if $v (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $rb))))
      (call $ln_row (local.get $o) (call $hsum (local.get $acc)) (local.get $gamma) (local.get $beta) (local.get $h) (local.get $eps))
      (br_if $tok (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $n)))))

  ;; out = LayerNorm(x + bias + res), row by row; out may be res.
  (func (export "add_ln") (param $x i32) (param $bias i32) (param $res i32) (param $gamma i32) (param $beta i32)
        (param $out i32) (param $rows i32) (param $h i32) (param $eps f32)
    (local $r i32) (local $i i32) (local $rb i32) (local $off i32) (local $acc v128) (local $v v128)
    (local.set $rb (i32.shl (local.get $h) (i32.const 2)))
    (loop $row
      (local.set $off (i32.mul (local.get $r) (local.get $rb)))
      (local.set $acc (v128.const i32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (loop $e
        (local.set $v (f32x4.add
          (f32x4.add (v128.load (i32.add (local.get $x) (i32.add (local.get $off) (local.get $i)))) (v128.load (i32.add (local.get $bias) (local.get $i))))
          (v128.load (i32.add (local.get $res) (i32.add (local.get $off) (local.get $i))))))
        (v128.store (i32.add (local.get $out) (i32.add (local.get $off) (local.get $i))) (local.get $v))
        (local.set $acc (f32x4.add (local.get $acc) (local.get $v)))
        (br_if $e (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $rb))))
      (call $ln_row (i32.add (local.get $out) (local.get $off)) (call $hsum (local.get $acc)) (local.get $gamma) (local.get $beta) (local.get $h) (local.get $eps))
      (br_if $row (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows)))))

  ;; qkv [b, s, 3H] (+ bias) into Q [b·heads, s, d] scaled by $scale,
  ;; Kᵀ [b·heads, d, s] and V [b·heads, s, d], H = heads·d.
  (func (export "split_heads") (param $qkv i32) (param $bias i32) (param $q i32) (param $kt i32) (param $v i32)
        (param $b i32) (param $s i32) (param $heads i32) (param $d i32) (param $scale f32)
    (local $t i32) (local $n i32) (local $hh i32) (local $j i32) (local $hb i32) (local $src i32) (local $bh i32) (local $dst i32)
    (local $sc v128) (local $kv v128) (local $kp i32) (local $sb i32)
    (local.set $sc (f32x4.splat (local.get $scale)))
    (local.set $hb (i32.shl (i32.mul (local.get $heads) (local.get $d)) (i32.const 2)))
    (local.set $sb (i32.shl (local.get $s) (i32.const 2)))
    (local.set $n (i32.mul (local.get $b) (local.get $s)))
    (loop $tok
      (local.set $src (i32.add (local.get $qkv) (i32.mul (local.get $t) (i32.mul (local.get $hb) (i32.const 3)))))
      (local.set $hh (i32.const 0))
      (loop $head
        ;; bh = batch·heads + head; row t mod s of that head.
        (local.set $bh (i32.add (i32.mul (i32.div_u (local.get $t) (local.get $s)) (local.get $heads)) (local.get $hh)))
        (local.set $dst (i32.shl (i32.add (i32.mul (i32.mul (local.get $bh) (local.get $s)) (local.get $d))
                                          (i32.mul (i32.rem_u (local.get $t) (local.get $s)) (local.get $d))) (i32.const 2)))
        (local.set $j (i32.const 0))
        (loop $e
          (v128.store (i32.add (local.get $q) (i32.add (local.get $dst) (local.get $j)))
            (f32x4.mul (local.get $sc)
              (f32x4.add (v128.load (i32.add (local.get $src) (local.get $j))) (v128.load (i32.add (local.get $bias) (local.get $j))))))
          (v128.store (i32.add (local.get $v) (i32.add (local.get $dst) (local.get $j)))
            (f32x4.add (v128.load (i32.add (local.get $src) (i32.add (local.get $j) (i32.shl (local.get $hb) (i32.const 1)))))
                       (v128.load (i32.add (local.get $bias) (i32.add (local.get $j) (i32.shl (local.get $hb) (i32.const 1)))))))
          ;; Kᵀ: lane c of this vector goes to row (j/4 + c) of the head's [d, s] block, column t mod s.
          (local.set $kv (f32x4.add (v128.load (i32.add (local.get $src) (i32.add (local.get $j) (local.get $hb))))
                                    (v128.load (i32.add (local.get $bias) (i32.add (local.get $j) (local.get $hb))))))
          (local.set $kp (i32.add (local.get $kt)
            (i32.shl (i32.add (i32.mul (i32.add (i32.mul (local.get $bh) (local.get $d)) (i32.shr_u (local.get $j) (i32.const 2))) (local.get $s))
                              (i32.rem_u (local.get $t) (local.get $s))) (i32.const 2))))
          (f32.store (local.get $kp) (f32x4.extract_lane 0 (local.get $kv)))
          (f32.store (i32.add (local.get $kp) (local.get $sb)) (f32x4.extract_lane 1 (local.get $kv)))
          (f32.store (i32.add (local.get $kp) (i32.shl (local.get $sb) (i32.const 1))) (f32x4.extract_lane 2 (local.get $kv)))
          (f32.store (i32.add (local.get $kp) (i32.mul (local.get $sb) (i32.const 3))) (f32x4.extract_lane 3 (local.get $kv)))
          (br_if $e (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (i32.shl (local.get $d) (i32.const 2)))))
        (local.set $src (i32.add (local.get $src) (i32.shl (local.get $d) (i32.const 2))))
        (local.set $bias (i32.add (local.get $bias) (i32.shl (local.get $d) (i32.const 2))))
        (br_if $head (i32.lt_u (local.tee $hh (i32.add (local.get $hh) (i32.const 1))) (local.get $heads))))
      (local.set $bias (i32.sub (local.get $bias) (local.get $hb)))
      (br_if $tok (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $n)))))

  ;; Softmax over the last axis of p [b·heads, s, s] (s a multiple of 4), in
  ;; place, over the first lens[batch] keys of each row, left unnormalised:
  ;; the row holds e^(x - max) and inv[row] = 1 / its sum, which merge_heads
  ;; applies to the row of P·V (d wide instead of s). Padded keys get
  ;; exactly 0, and a text of length 0 (a padded batch slot) a row of zeros
  ;; with inv 0. The keys up to the next whole vector are set to -inf first,
  ;; so that every pass runs on whole vectors: their e^x (2^-126 or less)
  ;; changes no sum of at least 1, and they are zeroed at the end.
  (func (export "softmax") (param $p i32) (param $b i32) (param $heads i32) (param $s i32) (param $lens i32) (param $inv i32)
    (call $softmax_mats (local.get $p) (local.get $heads) (local.get $s) (local.get $lens) (local.get $inv)
      (i32.const 0) (i32.mul (local.get $b) (local.get $heads))))

  ;; The same over part `part` of `parts` (the thread pool's calling
  ;; convention: the part number last): matrices [part·n/parts, (part+1)·n/parts)
  ;; of the n = b·heads, so that parts on different threads touch disjoint rows.
  (func (export "softmax_part") (param $p i32) (param $b i32) (param $heads i32) (param $s i32) (param $lens i32) (param $inv i32)
                                (param $parts i32) (param $part i32)
    (local $n i32)
    (local.set $n (i32.mul (local.get $b) (local.get $heads)))
    (call $softmax_mats (local.get $p) (local.get $heads) (local.get $s) (local.get $lens) (local.get $inv)
      (i32.div_u (i32.mul (local.get $part) (local.get $n)) (local.get $parts))
      (i32.div_u (i32.mul (i32.add (local.get $part) (i32.const 1)) (local.get $n)) (local.get $parts))))

  ;; Softmax of the matrices [bh, end) of P.
  (func $softmax_mats (param $p i32) (param $heads i32) (param $s i32) (param $lens i32) (param $inv i32) (param $bh i32) (param $end i32)
    (local $r i32) (local $row i32) (local $len i32) (local $len4 i32) (local $i i32) (local $sb i32)
    (local $m v128) (local $mx f32) (local $sum f32)
    (if (i32.ge_u (local.get $bh) (local.get $end)) (then (return)))
    (local.set $sb (i32.shl (local.get $s) (i32.const 2)))
    (loop $mat
      (local.set $len (i32.shl (i32.load (i32.add (local.get $lens) (i32.shl (i32.div_u (local.get $bh) (local.get $heads)) (i32.const 2)))) (i32.const 2)))
      (local.set $len4 (i32.and (i32.add (local.get $len) (i32.const 12)) (i32.const -16)))
      (local.set $r (i32.const 0))
      (loop $rows
        (local.set $row (i32.add (local.get $p) (i32.mul (i32.add (i32.mul (local.get $bh) (local.get $s)) (local.get $r)) (local.get $sb))))
        (local.set $sum (f32.const 0))
        (if (local.get $len)
          (then
            (local.set $i (local.get $len))
            (block $d (loop $l
              (br_if $d (i32.ge_u (local.get $i) (local.get $len4)))
              (f32.store (i32.add (local.get $row) (local.get $i)) (f32.const -inf))
              (local.set $i (i32.add (local.get $i) (i32.const 4)))
              (br $l)))
            ;; The maximum.
            (local.set $m (v128.const f32x4 -inf -inf -inf -inf))
            (local.set $i (i32.const 0))
            (loop $l
              (local.set $m (f32x4.max (local.get $m) (v128.load (i32.add (local.get $row) (local.get $i)))))
              (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $len4))))
            (local.set $mx (f32.max (f32.max (f32x4.extract_lane 0 (local.get $m)) (f32x4.extract_lane 1 (local.get $m)))
                                    (f32.max (f32x4.extract_lane 2 (local.get $m)) (f32x4.extract_lane 3 (local.get $m)))))
            (local.set $sum (f32.div (f32.const 1)
              (call $hsum (call $exp_sum (local.get $row) (local.get $row) (local.get $len4) (f32x4.splat (local.get $mx))))))))
        (f32.store (i32.add (local.get $inv) (i32.shl (i32.add (i32.mul (local.get $bh) (local.get $s)) (local.get $r)) (i32.const 2))) (local.get $sum))
        ;; Padded keys: exactly zero.
        (local.set $i (local.get $len))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $i) (local.get $sb)))
          (f32.store (i32.add (local.get $row) (local.get $i)) (f32.const 0))
          (local.set $i (i32.add (local.get $i) (i32.const 4)))
          (br $l)))
        (br_if $rows (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $s))))
      (br_if $mat (i32.lt_u (local.tee $bh (i32.add (local.get $bh) (i32.const 1))) (local.get $end)))))

  ;; ctx [b·heads, s, d], each row times inv[its row] (the softmax's
  ;; 1 / sum), into out [b, s, heads·d].
  (func (export "merge_heads") (param $ctx i32) (param $inv i32) (param $out i32) (param $b i32) (param $s i32) (param $heads i32) (param $d i32)
    (local $t i32) (local $hh i32) (local $j i32) (local $db i32) (local $src i32) (local $dst i32) (local $n i32) (local $row i32) (local $sc v128)
    (local.set $db (i32.shl (local.get $d) (i32.const 2)))
    (local.set $n (i32.mul (local.get $b) (local.get $s)))
    (loop $tok
      (local.set $dst (i32.add (local.get $out) (i32.mul (local.get $t) (i32.mul (local.get $heads) (local.get $db)))))
      (local.set $hh (i32.const 0))
      (loop $head
        ;; Row (batch·heads + head)·s + t mod s of ctx.
        (local.set $row (i32.add (i32.mul (i32.add (i32.mul (i32.div_u (local.get $t) (local.get $s)) (local.get $heads)) (local.get $hh)) (local.get $s))
                                 (i32.rem_u (local.get $t) (local.get $s))))
        (local.set $src (i32.add (local.get $ctx) (i32.mul (local.get $row) (local.get $db))))
        (local.set $sc (v128.load32_splat (i32.add (local.get $inv) (i32.shl (local.get $row) (i32.const 2)))))
        (local.set $j (i32.const 0))
        (loop $e
          (v128.store (i32.add (local.get $dst) (local.get $j)) (f32x4.mul (v128.load (i32.add (local.get $src) (local.get $j))) (local.get $sc)))
          (br_if $e (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $db))))
        (local.set $dst (i32.add (local.get $dst) (local.get $db)))
        (br_if $head (i32.lt_u (local.tee $hh (i32.add (local.get $hh) (i32.const 1))) (local.get $heads))))
      (br_if $tok (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $n)))))

  ;; Symmetric 16-bit quantisation of each row of x [rows, k] (k even) for
  ;; matmul_i16: scale = max |x| / qmax in f32 (0 for a row of zeros, whose
  ;; q are then all 0), q = x · (qmax / max |x|) in f32 rounded half to even
  ;; (never beyond ±qmax: |x·inv| < qmax + 0.5), stored as i16 pairs into
  ;; q [rows, k/2] (word p: q[2p] in its low half, q[2p+1] in its high),
  ;; scales[row] = scale. Eight values at a time: the max with f32x4.pmax
  ;; (one maxps; Wasm's max would add NaN handling), the rounding by adding
  ;; 1.5·2^23, after which the float's low bits are the rounded integer
  ;; (|v| < 2^22), as in $exp_sum, then i16x8.narrow_i32x4_s (lane order is
  ;; memory order, so the pairs come out packed). At 1x128 this took the
  ;; kernel from 4.7 to ~1 ms of a 58 ms encode (dev machine, Chromium 156;
  ;; f32x4.nearest, min, max and trunc_sat are several instructions each in
  ;; V8 on x86). The last k mod 8 go a pair at a time. Rows need no alignment.
  (func (export "quant_rows") (param $x i32) (param $rows i32) (param $k i32) (param $qmax i32) (param $q i32) (param $scales i32)
    (local $r i32) (local $i i32) (local $kb i32) (local $k4 i32) (local $k8 i32) (local $src i32) (local $dst i32)
    (local $m v128) (local $mx f32) (local $qm f32) (local $sc f32) (local $dv v128)
    (if (i32.eqz (local.get $rows)) (then (return)))
    ;; Bytes of a row of x, and of its whole vectors of 4 and of 8.
    (local.set $kb (i32.shl (local.get $k) (i32.const 2)))
    (local.set $k4 (i32.and (local.get $kb) (i32.const -16)))
    (local.set $k8 (i32.and (local.get $kb) (i32.const -32)))
    (local.set $qm (f32.convert_i32_s (local.get $qmax)))
    (loop $row
      (local.set $src (i32.add (local.get $x) (i32.mul (local.get $r) (local.get $kb))))
      ;; A row of q is k/2 words: k·2 bytes, half the bytes of a row of x.
      (local.set $dst (i32.add (local.get $q) (i32.mul (local.get $r) (i32.shl (local.get $k) (i32.const 1)))))
      ;; max |x|
      (local.set $m (v128.const i32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (block $d (loop $l
        (br_if $d (i32.ge_u (local.get $i) (local.get $k4)))
        (local.set $m (f32x4.pmax (local.get $m) (f32x4.abs (v128.load (i32.add (local.get $src) (local.get $i))))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $l)))
      (local.set $mx (f32.max (f32.max (f32x4.extract_lane 0 (local.get $m)) (f32x4.extract_lane 1 (local.get $m)))
                              (f32.max (f32x4.extract_lane 2 (local.get $m)) (f32x4.extract_lane 3 (local.get $m)))))
      (block $d (loop $l
        (br_if $d (i32.ge_u (local.get $i) (local.get $kb)))
        (local.set $mx (f32.max (local.get $mx) (f32.abs (f32.load (i32.add (local.get $src) (local.get $i))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $l)))
      (local.set $sc (f32.div (local.get $mx) (local.get $qm)))
      (f32.store (i32.add (local.get $scales) (i32.shl (local.get $r) (i32.const 2))) (local.get $sc))
      ;; Multiplied by qmax / max (a division per value cost this kernel
      ;; about 4 ms of a 58 ms encode at 1x64); a row of zeros by 0.
      (local.set $sc (select (f32.div (local.get $qm) (local.get $mx)) (f32.const 0) (f32.gt (local.get $mx) (f32.const 0))))
      (local.set $dv (f32x4.splat (local.get $sc)))
      (local.set $i (i32.const 0))
      (block $d (loop $l
        (br_if $d (i32.ge_u (local.get $i) (local.get $k8)))
        (v128.store (i32.add (local.get $dst) (i32.shr_u (local.get $i) (i32.const 1)))
          (i16x8.narrow_i32x4_s
            (i32x4.sub (f32x4.add (f32x4.mul (v128.load (i32.add (local.get $src) (local.get $i))) (local.get $dv))
                                  (v128.const f32x4 12582912 12582912 12582912 12582912))
                       (v128.const f32x4 12582912 12582912 12582912 12582912))
            (i32x4.sub (f32x4.add (f32x4.mul (v128.load (i32.add (local.get $src) (i32.add (local.get $i) (i32.const 16)))) (local.get $dv))
                                  (v128.const f32x4 12582912 12582912 12582912 12582912))
                       (v128.const f32x4 12582912 12582912 12582912 12582912))))
        (local.set $i (i32.add (local.get $i) (i32.const 32)))
        (br $l)))
      (block $d (loop $l
        (br_if $d (i32.ge_u (local.get $i) (local.get $kb)))
        (i32.store (i32.add (local.get $dst) (i32.shr_u (local.get $i) (i32.const 1)))
          (i32.or
            (i32.and (i32.trunc_sat_f32_s (f32.max (f32.min (f32.nearest
              (f32.mul (f32.load (i32.add (local.get $src) (local.get $i))) (local.get $sc))) (local.get $qm)) (f32.neg (local.get $qm))))
              (i32.const 0xffff))
            (i32.shl (i32.trunc_sat_f32_s (f32.max (f32.min (f32.nearest
              (f32.mul (f32.load (i32.add (local.get $src) (i32.add (local.get $i) (i32.const 4)))) (local.get $sc))) (local.get $qm)) (f32.neg (local.get $qm))))
              (i32.const 16))))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $l)))
      (br_if $row (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows)))))

  ;; out[i] = mean of x[i, :lens[i], :] (then divided by its L2 norm when
  ;; $norm) for i < b; a text of length 0 gets zeros.
  (func (export "pool") (param $x i32) (param $lens i32) (param $out i32) (param $b i32) (param $s i32) (param $h i32) (param $norm i32)
    (local $i i32) (local $t i32) (local $j i32) (local $rb i32) (local $len i32) (local $src i32) (local $o i32)
    (local $acc v128) (local $sc v128) (local $ss f32)
    (local.set $rb (i32.shl (local.get $h) (i32.const 2)))
    (loop $text
      (local.set $o (i32.add (local.get $out) (i32.mul (local.get $i) (local.get $rb))))
      (local.set $len (i32.load (i32.add (local.get $lens) (i32.shl (local.get $i) (i32.const 2)))))
      (local.set $j (i32.const 0))
      (loop $e
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $src (i32.add (local.get $x) (i32.add (i32.mul (i32.mul (local.get $i) (local.get $s)) (local.get $rb)) (local.get $j))))
        (local.set $t (i32.const 0))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $t) (local.get $len)))
          (local.set $acc (f32x4.add (local.get $acc) (v128.load (local.get $src))))
          (local.set $src (i32.add (local.get $src) (local.get $rb)))
          (local.set $t (i32.add (local.get $t) (i32.const 1)))
          (br $l)))
        (v128.store (i32.add (local.get $o) (local.get $j))
          (f32x4.div (local.get $acc) (f32x4.splat (f32.convert_i32_u (select (local.get $len) (i32.const 1) (local.get $len))))))
        (br_if $e (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $rb))))
      (if (local.get $norm)
        (then
          (local.set $acc (v128.const i32x4 0 0 0 0))
          (local.set $j (i32.const 0))
          (loop $e
            (local.set $sc (v128.load (i32.add (local.get $o) (local.get $j))))
            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $sc) (local.get $sc))))
            (br_if $e (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $rb))))
          ;; sentence-transformers divides by max(norm, 1e-12).
          (local.set $sc (f32x4.splat (f32.div (f32.const 1) (f32.max (f32.sqrt (call $hsum (local.get $acc))) (f32.const 1e-12)))))
          (local.set $j (i32.const 0))
          (loop $e
            (v128.store (i32.add (local.get $o) (local.get $j)) (f32x4.mul (v128.load (i32.add (local.get $o) (local.get $j))) (local.get $sc)))
            (br_if $e (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $rb))))))
      (br_if $text (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $b)))))
)
