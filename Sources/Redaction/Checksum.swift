/// CRC-32 (ISO-HDLC, the one PNG and zlib use).
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func update<C: Collection>(_ crc: UInt32, _ bytes: C) -> UInt32 where C.Element == UInt8 {
        var c = ~crc
        table.withUnsafeBufferPointer { t in
            for b in bytes { c = t[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        }
        return ~c
    }

    static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        update(0, bytes)
    }
}

/// A small, bounded zlib/deflate decoder (RFC 1950/1951), after zlib's `puff.c`.
///
/// Only used to look inside compressed metadata (PNG `zTXt`/compressed `iTXt`, HEIF items with a
/// content encoding): Foundation on Linux exposes no inflate, and the package stays dependency-free.
/// Output is capped; anything malformed or too large returns nil (the caller then fails closed).
enum Inflate {
    /// Decodes a zlib stream (2-byte header, deflate data; the Adler-32 trailer is not checked).
    static func zlib(_ input: ArraySlice<UInt8>, limit: Int) -> [UInt8]? {
        guard input.count >= 2 else { return nil }
        let cmf = input[input.startIndex], flg = input[input.startIndex + 1]
        guard cmf & 0x0F == 8, (UInt16(cmf) << 8 | UInt16(flg)) % 31 == 0, flg & 0x20 == 0 else {
            // Not a zlib header: try raw deflate (HTTP "deflate" is sometimes raw).
            return raw(input, limit: limit)
        }
        return raw(input.dropFirst(2), limit: limit)
    }

    /// Decodes raw deflate data.
    static func raw(_ input: ArraySlice<UInt8>, limit: Int) -> [UInt8]? {
        var state = State(input: Array(input), limit: limit)
        do {
            try state.run()
            return state.output
        } catch {
            return nil
        }
    }

    private struct Failure: Error {}

    private struct Huffman {
        var count = [Int](repeating: 0, count: 16)
        var symbol: [Int]

        /// Builds from code lengths; returns nil for over-subscribed sets.
        init?(lengths: ArraySlice<Int>) {
            symbol = [Int](repeating: 0, count: lengths.count)
            for l in lengths { count[l] += 1 }
            if count[0] == lengths.count { return }   // no codes: fine, decoding any fails
            var left = 1
            for len in 1..<16 {
                left <<= 1
                left -= count[len]
                if left < 0 { return nil }
            }
            var offs = [Int](repeating: 0, count: 16)
            for len in 1..<15 { offs[len + 1] = offs[len] + count[len] }
            for (sym, l) in lengths.enumerated() where l != 0 {
                symbol[offs[l]] = sym
                offs[l] += 1
            }
        }
    }

    private struct State {
        let input: [UInt8]
        let limit: Int
        var position = 0
        var bitBuffer = 0
        var bitCount = 0
        var output: [UInt8] = []

        init(input: [UInt8], limit: Int) {
            self.input = input
            self.limit = limit
        }

        mutating func bits(_ need: Int) throws -> Int {
            var value = bitBuffer
            while bitCount < need {
                guard position < input.count else { throw Failure() }
                value |= Int(input[position]) << bitCount
                position += 1
                bitCount += 8
            }
            bitBuffer = value >> need
            bitCount -= need
            return value & ((1 << need) - 1)
        }

        mutating func decode(_ h: Huffman) throws -> Int {
            var code = 0, first = 0, index = 0
            for len in 1..<16 {
                code |= try bits(1)
                let count = h.count[len]
                if code - count < first { return h.symbol[index + (code - first)] }
                index += count
                first += count
                first <<= 1
                code <<= 1
            }
            throw Failure()
        }

        static let lengthBase = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
        static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
        static let distBase = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]
        static let distExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]

        mutating func codes(_ lencode: Huffman, _ distcode: Huffman) throws {
            while true {
                var symbol = try decode(lencode)
                if symbol < 256 {
                    guard output.count < limit else { throw Failure() }
                    output.append(UInt8(symbol))
                } else if symbol == 256 {
                    return
                } else {
                    symbol -= 257
                    guard symbol < 29 else { throw Failure() }
                    let len = State.lengthBase[symbol] + (try bits(State.lengthExtra[symbol]))
                    let dsym = try decode(distcode)
                    guard dsym < 30 else { throw Failure() }
                    let dist = State.distBase[dsym] + (try bits(State.distExtra[dsym]))
                    guard dist <= output.count, output.count + len <= limit else { throw Failure() }
                    let from = output.count - dist
                    for k in 0..<len { output.append(output[from + k]) }
                }
            }
        }

        mutating func stored() throws {
            bitBuffer = 0
            bitCount = 0
            guard position + 4 <= input.count else { throw Failure() }
            let len = Int(input[position]) | Int(input[position + 1]) << 8
            let nlen = Int(input[position + 2]) | Int(input[position + 3]) << 8
            guard len == (~nlen & 0xFFFF) else { throw Failure() }
            position += 4
            guard position + len <= input.count, output.count + len <= limit else { throw Failure() }
            output.append(contentsOf: input[position..<(position + len)])
            position += len
        }

        mutating func fixed() throws {
            var lengths = [Int](repeating: 0, count: 288 + 30)
            for s in 0..<144 { lengths[s] = 8 }
            for s in 144..<256 { lengths[s] = 9 }
            for s in 256..<280 { lengths[s] = 7 }
            for s in 280..<288 { lengths[s] = 8 }
            for s in 288..<318 { lengths[s] = 5 }
            guard let l = Huffman(lengths: lengths[0..<288]), let d = Huffman(lengths: lengths[288..<318]) else { throw Failure() }
            try codes(l, d)
        }

        mutating func dynamic() throws {
            let nlen = try bits(5) + 257
            let ndist = try bits(5) + 1
            let ncode = try bits(4) + 4
            guard nlen <= 286, ndist <= 30 else { throw Failure() }
            let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
            var lengths = [Int](repeating: 0, count: 320)
            for i in 0..<ncode { lengths[order[i]] = try bits(3) }
            guard let lencode = Huffman(lengths: lengths[0..<19]) else { throw Failure() }
            var index = 0
            while index < nlen + ndist {
                var symbol = try decode(lencode)
                if symbol < 16 {
                    lengths[index] = symbol
                    index += 1
                } else {
                    var len = 0
                    if symbol == 16 {
                        guard index > 0 else { throw Failure() }
                        len = lengths[index - 1]
                        symbol = 3 + (try bits(2))
                    } else if symbol == 17 {
                        symbol = 3 + (try bits(3))
                    } else {
                        symbol = 11 + (try bits(7))
                    }
                    guard index + symbol <= nlen + ndist else { throw Failure() }
                    for _ in 0..<symbol {
                        lengths[index] = len
                        index += 1
                    }
                }
            }
            guard lengths[256] != 0 else { throw Failure() }
            guard let l = Huffman(lengths: lengths[0..<nlen]),
                  let d = Huffman(lengths: lengths[nlen..<(nlen + ndist)]) else { throw Failure() }
            try codes(l, d)
        }

        mutating func run() throws {
            var last = 0
            repeat {
                last = try bits(1)
                switch try bits(2) {
                case 0: try stored()
                case 1: try fixed()
                case 2: try dynamic()
                default: throw Failure()
                }
            } while last == 0
        }
    }
}
