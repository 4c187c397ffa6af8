import { useEffect, useRef, useState } from "react";

/**
 * `value`, changing at most once every `ms`: a change within `ms` of the last one shows when
 * that time is up (the latest value then), so nothing is lost, only late. A new `key` (what the
 * value is of: the keys or rows a person just chose) shows at once.
 */
export function useThrottled<T>(value: T, ms: number, key: string): T {
  const [shown, setShown] = useState({ value, key });
  const shownAt = useRef(0);
  const show = (next: { value: T; key: string }) => {
    shownAt.current = performance.now();
    setShown(next);
  };
  const immediate = key !== shown.key;
  useEffect(() => {
    if (Object.is(value, shown.value) && key === shown.key) return;
    const wait = immediate ? 0 : shownAt.current + ms - performance.now();
    if (wait <= 0) {
      show({ value, key });
      return;
    }
    const timer = window.setTimeout(() => show({ value, key }), wait);
    return () => window.clearTimeout(timer);
  }, [value, key, shown, ms, immediate]);
  return immediate ? value : shown.value;
}
