#!/usr/bin/perl
# Hash-, string- and regex-heavy Perl workload with deterministic output.
#
# Run by run_real_program.py once on the system allocator and once under LD_PRELOAD; the two
# stdouts must match byte for byte. Perl randomises hash order per process, so everything
# printed from a hash is sorted first (the driver also pins PERL_HASH_SEED=0 for good measure).
# Perl's own malloc is not used by Debian's build: every SV, hash bucket and string buffer
# below is a malloc/realloc/free.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

# Linear congruential generator: same sequence on every run (Perl's rand() is seeded per run).
my $state = 12345;
sub rnd {
    my ($n) = @_;
    $state = ($state * 1103515245 + 12345) % 2147483648;
    return ($state >> 16) % $n;    # the low bits of an LCG cycle quickly
}
sub word {
    my ($len) = @_;
    return join '', map { chr(97 + rnd(26)) } 1 .. $len;
}
sub section { print "== $_[0]\n"; }

section('hashes');
my %h;
for my $i (1 .. 200_000) {
    $h{"k$i-" . word(1 + rnd(20))} = [$i, word(rnd(30)), { n => $i }];
}
print 'entries ', scalar(keys %h), "\n";
# Delete every other entry, then refill with values of other sizes: freed buckets and strings
# of every size are reused.
delete @h{ grep { $h{$_}[0] % 2 == 0 } keys %h };
print 'after delete ', scalar(keys %h), "\n";
$h{"r$_"} = 'x' x ($_ % 500) for 1 .. 100_000;
print 'after refill ', scalar(keys %h), "\n";
my @keys = sort keys %h;
print "first @keys[0..2] last @keys[-3..-1]\n";
print 'keys md5 ', md5_hex(join "\n", @keys), "\n";
my %by_len;
$by_len{ length $_ }++ for @keys;
print join(' ', map { "$_:$by_len{$_}" } (sort { $a <=> $b } keys %by_len)[0 .. 5]), "\n";

section('strings');
my $text = '';
for my $i (1 .. 40_000) {
    $text .= word(1 + rnd(12)) . ($i % 11 ? ' ' : "\n");
}
print 'text length ', length($text), ' md5 ', md5_hex($text), "\n";
my @lines = split /\n/, $text;
print 'lines ', scalar(@lines), "\n";
my $upper = uc $text;
$upper =~ tr/AEIOU/01234/;
print 'tr md5 ', md5_hex($upper), "\n";
my $big = join ',', 1 .. 1_000_000;
print 'big join ', length($big), ' md5 ', md5_hex($big), "\n";
for my $size (1 << 10, 1 << 16, 1 << 18, (1 << 18) + 1, 1 << 20, 5 << 20) {
    my $blob = chr($size % 251) x $size;
    print "blob $size ", md5_hex($blob), "\n";
}
my $packed = pack('N*', map { $_ * 7 } 1 .. 300_000);
print 'pack ', length($packed), ' checksum ', unpack('%32N*', $packed), "\n";

section('regex');
my $corpus = join "\n",
    map { sprintf 'user%d@host%d.example id=%d tag=%s', rnd(1000), rnd(50), rnd(1_000_000), word(5) }
    1 .. 30_000;
my @emails = $corpus =~ /(\w+)@(host\d+)\.example/g;
print 'captures ', scalar(@emails), " first $emails[0] $emails[1]\n";
my %hosts;
$hosts{$_}++ for grep { /^host/ } @emails;
my @top = (sort { $hosts{$b} <=> $hosts{$a} || $a cmp $b } keys %hosts)[0 .. 2];
print 'top hosts ', join(' ', map { "$_=$hosts{$_}" } @top), "\n";
(my $swapped = $corpus) =~ s/id=(\d+) tag=(\w+)/tag=$2 id=$1/g;
print 'swapped md5 ', md5_hex($swapped), "\n";
# Interpolated patterns are recompiled every iteration: regex programs allocated and freed.
my $total = 0;
for my $i (0 .. 399) {
    my @m = $corpus =~ /user$i\@host(\d+)/g;
    $total += @m;
}
print "per-user matches $total\n";
my $evald = 0;
$evald += eval "$_ * 3 + length('x' x $_)" for 1 .. 3000;
print "eval sum $evald\n";

section('structures');
# Deep nested structures built and torn down; sort with a custom comparator on a large list.
my @records = map { { id => $_, name => word(8), tags => [map { word(3) } 1 .. rnd(6)] } } 1 .. 80_000;
my @sorted = sort { $a->{name} cmp $b->{name} || $a->{id} <=> $b->{id} } @records;
print "first sorted $sorted[0]{name} $sorted[0]{id} last $sorted[-1]{name} $sorted[-1]{id}\n";
my $tag_count = 0;
$tag_count += @{ $_->{tags} } for @records;
print "tags $tag_count\n";
my %index;
push @{ $index{ substr $_->{name}, 0, 2 } }, $_->{id} for @records;
print 'index buckets ', scalar(keys %index), ' md5 ',
    md5_hex(join ';', map { "$_=" . scalar @{ $index{$_} } } sort keys %index), "\n";
undef @records;
undef @sorted;
undef %index;
my @stack;
for my $i (1 .. 500_000) {
    push @stack, "item$i";
    splice(@stack, rnd(scalar @stack), 1) if $i % 3 == 0;
}
print 'stack ', scalar(@stack), ' md5 ', md5_hex(join ',', @stack), "\n";

section('threads');
# Debian's perl has ithreads: each thread starts with a full copy of the interpreter (a burst
# of allocation), and the strings threads put in the shared queue are freed by other threads.
# Results are joined in creation order, so scheduling does not show in the output.
use threads;
use Thread::Queue;
my $queue = Thread::Queue->new;
my @workers = map {
    my $id = $_;
    threads->create(sub {
        my %seen;
        my $n = 0;
        for my $i (1 .. 20_000) {
            my $s = join '-', $id, $i, 'x' x ($i % 97);
            $seen{$s} = length $s;
            $queue->enqueue($s) if $i % 5 == 0;
            $n += length $s;
        }
        return ($n, scalar keys %seen);
    });
} 1 .. 4;
my @joined = map { [$_->join] } @workers;
$queue->end;
my ($items, $chars) = (0, 0);
while (defined(my $s = $queue->dequeue)) {
    $items++;
    $chars += length $s;
}
print "thread $_: @{ $joined[$_ - 1] }\n" for 1 .. 4;
print "queue items $items chars $chars\n";
print "== done\n";
