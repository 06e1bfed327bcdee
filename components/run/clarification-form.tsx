"use client";

import { useState } from "react";
import { Alert, AlertDescription, AlertTitle } from "@/components/ui/alert";
import { Button } from "@/components/ui/button";
import { Card, CardContent, CardDescription, CardFooter, CardHeader, CardTitle } from "@/components/ui/card";
import { Checkbox } from "@/components/ui/checkbox";
import { Input } from "@/components/ui/input";
import { Label } from "@/components/ui/label";
import { RadioGroup, RadioGroupItem } from "@/components/ui/radio-group";
import { Textarea } from "@/components/ui/textarea";
import type { Clarification, Run } from "@/components/runs/api";
import { useDecision } from "./use-decision";

const MAX_FILE_BYTES = 256 * 1024;

function toBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] ?? "");
    reader.onerror = () => reject(reader.error ?? new Error("Could not read the file."));
    reader.readAsDataURL(file);
  });
}

/** A question from the run, answered in the form its response type asks for. */
export function ClarificationForm({ run, clarification }: { run: Run; clarification: Clarification }) {
  const decision = useDecision(run.id);
  const [text, setText] = useState("");
  const [single, setSingle] = useState("");
  const [multiple, setMultiple] = useState<string[]>([]);
  const [file, setFile] = useState<File | null>(null);
  const [error, setError] = useState<string | null>(null);
  const options = clarification.options ?? [];
  const type = clarification.responseType;

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    let response: unknown;
    if (type === "single_choice") {
      if (!single) return setError("Choose one option.");
      response = single;
    } else if (type === "multiple_choice") {
      if (!multiple.length) return setError("Choose at least one option.");
      response = multiple;
    } else if (type === "file") {
      if (!file) return setError("Choose a file to upload.");
      if (file.size > MAX_FILE_BYTES) return setError(`The file is ${Math.ceil(file.size / 1024)} KiB; the limit is 256 KiB.`);
      response = { fileName: file.name, contentBase64: await toBase64(file), ...(file.type ? { contentType: file.type } : {}) };
    } else {
      if (!text.trim()) return setError("Write an answer.");
      response = text.trim();
    }
    setError(null);
    decision.mutate({ url: `/api/clarifications/${clarification.id}/answer`, body: { response }, success: "Answer sent; the run resumes" });
  };

  return (
    <Card className="border-amber-500/50" data-testid="clarification-form" data-response-type={type}>
      <form onSubmit={submit} noValidate>
        <CardHeader>
          <CardTitle>The {clarification.stage} stage asks</CardTitle>
          <CardDescription className="text-foreground text-base" id="clarification-question">
            {clarification.question}
          </CardDescription>
          {clarification.context && <p className="text-muted-foreground text-sm whitespace-pre-wrap">{clarification.context}</p>}
        </CardHeader>
        <CardContent className="space-y-3 py-4">
          {type === "single_choice" && (
            <RadioGroup value={single} onValueChange={setSingle} aria-labelledby="clarification-question">
              {options.map((option, i) => (
                <div key={option} className="flex items-center gap-2">
                  <RadioGroupItem value={option} id={`clr-opt-${i}`} />
                  <Label htmlFor={`clr-opt-${i}`} className="font-normal">
                    {option}
                  </Label>
                </div>
              ))}
            </RadioGroup>
          )}
          {type === "multiple_choice" && (
            <fieldset className="space-y-2" aria-labelledby="clarification-question">
              {options.map((option, i) => (
                <div key={option} className="flex items-center gap-2">
                  <Checkbox
                    id={`clr-opt-${i}`}
                    checked={multiple.includes(option)}
                    onCheckedChange={(checked) => setMultiple((m) => (checked ? [...m, option] : m.filter((o) => o !== option)))}
                  />
                  <Label htmlFor={`clr-opt-${i}`} className="font-normal">
                    {option}
                  </Label>
                </div>
              ))}
            </fieldset>
          )}
          {type === "file" && (
            <div className="grid gap-2">
              <Label htmlFor="clr-file">File (up to 256 KiB)</Label>
              <Input id="clr-file" type="file" onChange={(e) => setFile(e.target.files?.[0] ?? null)} />
            </div>
          )}
          {type !== "single_choice" && type !== "multiple_choice" && type !== "file" && (
            <div className="grid gap-2">
              <Label htmlFor="clr-text">Your answer</Label>
              <Textarea id="clr-text" rows={4} value={text} onChange={(e) => setText(e.target.value)} />
            </div>
          )}
          {error && (
            <p className="text-destructive text-xs" role="alert">
              {error}
            </p>
          )}
          {decision.error && (
            <Alert variant="destructive">
              <AlertTitle>The answer was not saved</AlertTitle>
              <AlertDescription>{decision.error.message}</AlertDescription>
            </Alert>
          )}
        </CardContent>
        <CardFooter className="gap-2">
          <Button type="submit" disabled={decision.isPending} data-testid="answer">
            Send answer
          </Button>
          <Button
            type="button"
            variant="ghost"
            disabled={decision.isPending}
            data-testid="skip-question"
            title="The agent proceeds with its best judgement and notes the assumption it made"
            onClick={() =>
              decision.mutate({ url: `/api/clarifications/${clarification.id}/skip`, success: "Skipped; the run proceeds with its best judgement" })
            }
          >
            Skip — proceed with best judgement
          </Button>
        </CardFooter>
      </form>
    </Card>
  );
}
