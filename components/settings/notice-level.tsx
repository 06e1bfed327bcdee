"use client";

import { Label } from "@/components/ui/label";
import type { NoticeLevel } from "@/lib/db/schema";

const LEVELS: Array<[NoticeLevel, string]> = [
  ["decisions", "Decisions only"],
  ["run_ends", "Decisions and run ends (completed, failed)"],
  ["everything", "Everything (run pauses too)"],
];

/** What a channel (or a person's own channel) receives. */
export function NoticeLevelSelect({ id, value, onChange }: { id: string; value: NoticeLevel; onChange: (level: NoticeLevel) => void }) {
  return (
    <div className="space-y-1">
      <Label htmlFor={id} className="text-xs">
        What to receive
      </Label>
      <select
        id={id}
        data-testid={id}
        className="border-input bg-background h-9 w-full rounded-md border px-2 text-sm"
        value={value}
        onChange={(e) => onChange(e.target.value as NoticeLevel)}
      >
        {LEVELS.map(([level, label]) => (
          <option key={level} value={level}>
            {label}
          </option>
        ))}
      </select>
    </div>
  );
}
